package natsjs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// msgShape is what the engine's publisher puts in a message besides its
// payload (see benchEngineFast).
type msgShape int

const (
	shapeNone msgShape = iota
	shapeHeaders
	shapeChecked
)

// benchEngineFast measures the server's own fast batch publish (ADR-50,
// nats-server 2.14) on c, doing what `nats bench js pub fast` (natscli
// v0.5, its defaults: --batch 500, --max-outstanding-acks 1) does with
// its publisher: one plain nats.go client publishes b.N 100-byte messages
// on one subject of a stream of its own (natscli's bench stream: limits
// retention, discard new, file storage, the replicas asked for, direct
// get and batch publish allowed) as one fast batch in "fail" mode. The
// batch, its sequence and the operation are in each message's reply
// subject (<inbox>.<flow>.fail.<seq>.<op>.$FI); after the first message it
// waits for the server's first flow ack; it stalls whenever the messages
// beyond the last flow ack reach the flow the server asks for (500, one
// outstanding ack); then it ends the batch (an end-of-batch commit, no
// message) and waits for the PubAck. nats.go v1.56 has no API for it,
// hence the subjects by hand.
//
// With a shape, each message has what a native record of 100 bytes has
// besides its payload (the same publisher otherwise), as a nats.Header
// map: shapeHeaders, its headers of inflight's own, Inflight-Producer and
// Inflight-Seq;
// shapeChecked, that and the check of a fence on a subject of the same
// stream (Nats-Expected-Last-Subject-Sequence and -Subject), as the store
// writes them: what the server's work on a native record costs, without
// inflight.
func benchEngineFast(b *testing.B, c *natsjstest.Cluster, replicas int, shape msgShape) {
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("ENGINE%d", benchRun.Add(1))
	// Subjects as long as the store's: the records on PREFIX.<topic>.<producer>,
	// the fence on _INFLIGHT.PREFIX.fence.<producer>.
	subject, fenceSubject := name+"."+testTopic+".bench-0-0", "_INFLIGHT."+name+".fence.bench-0-0"
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>", "_INFLIGHT." + name + ".>"},
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew, Storage: jetstream.FileStorage,
		Replicas: replicas, AllowDirect: true, AllowBatchPublish: true})
	if err != nil {
		b.Fatal(err)
	}
	const (
		flow         = 500 // --batch
		outstanding  = 1   // --max-outstanding-acks
		opStart      = 0
		opAppend     = 1
		opCommitEOB  = 3
		payloadBytes = 100
	)
	type reply struct {
		Type   string          `json:"type"` // "ack", "err", "gap"; "" for the PubAck
		Seq    uint64          `json:"seq"`
		Msgs   uint64          `json:"msgs"`
		Stream string          `json:"stream"`
		Error  json.RawMessage `json:"error"`
	}
	var (
		mu      sync.Mutex
		anyAck  bool   // the first flow ack came (its seq is 0)
		acked   uint64 // the highest sequence a flow ack confirmed
		curFlow uint64 = flow
		final   *reply
		wake    = make(chan struct{}, 1)
	)
	inbox := nc.NewInbox()
	sub, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
		var r reply
		_ = json.Unmarshal(m.Data, &r)
		mu.Lock()
		switch r.Type {
		case "ack":
			anyAck, acked = true, max(acked, r.Seq)
			if r.Msgs > 0 {
				curFlow = r.Msgs
			}
		case "":
			final = &r
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	prefix := inbox + "." + strconv.Itoa(flow) + ".fail."
	replyTo := func(seq uint64, op int) string {
		return prefix + strconv.FormatUint(seq, 10) + "." + strconv.Itoa(op) + ".$FI"
	}
	waitUntil := func(what string, cond func() bool) {
		for {
			mu.Lock()
			ok := cond()
			errReply := final != nil && len(final.Error) > 0 && string(final.Error) != "null"
			mu.Unlock()
			if errReply {
				b.Fatalf("fast batch: %s", final.Error)
			}
			if ok {
				return
			}
			select {
			case <-wake:
			case <-ctx.Done():
				b.Fatalf("fast batch: %s: no reply in time", what)
			}
		}
	}
	msg := &nats.Msg{Subject: subject, Data: make([]byte, payloadBytes)}
	var fence string // the fence's stream sequence, shapeChecked
	if shape == shapeChecked {
		ack, err := js.Publish(ctx, fenceSubject, nil)
		if err != nil {
			b.Fatal(err)
		}
		fence = strconv.FormatUint(ack.Sequence, 10)
	}
	b.ResetTimer()
	start := time.Now()
	n := uint64(b.N)
	for seq := uint64(1); seq <= n; seq++ {
		op := opAppend
		if seq == 1 {
			op = opStart
		}
		msg.Reply = replyTo(seq, op)
		if shape != shapeNone {
			msg.Header = nats.Header{"Inflight-Producer": {"svc-1"}, "Inflight-Seq": {strconv.FormatUint(seq, 10)}}
		}
		if shape == shapeChecked {
			msg.Header["Nats-Expected-Last-Subject-Sequence"] = []string{fence}
			msg.Header["Nats-Expected-Last-Subject-Sequence-Subject"] = []string{fenceSubject}
		}
		if err := nc.PublishMsg(msg); err != nil {
			b.Fatal(err)
		}
		if seq == 1 {
			waitUntil("first ack", func() bool { return anyAck })
			continue
		}
		waitUntil("flow ack", func() bool { return acked+curFlow*outstanding > seq })
	}
	end := &nats.Msg{Subject: msg.Subject, Reply: replyTo(n+1, opCommitEOB)}
	if err := nc.PublishMsg(end); err != nil {
		b.Fatal(err)
	}
	waitUntil("PubAck", func() bool { return final != nil })
	elapsed := time.Since(start)
	b.StopTimer()
	if final.Stream != name {
		b.Fatalf("fast batch: PubAck from stream %q", final.Stream)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
}
