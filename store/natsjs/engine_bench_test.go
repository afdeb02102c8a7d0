package natsjs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// benchEngineFast measures the server's own fast batch publish (ADR-50,
// nats-server 2.14) on c, what `nats bench js pub fast` does: one client
// publishes b.N 100-byte messages as one fast batch on a stream of its own
// (same replicas, file storage) with the flow-controlled reply subjects
// (<inbox>.<batch id>.<flow>.fail.<seq>.<op>.$FI), keeping at most two
// flow windows unacknowledged, and waits for the commit's ack. nats.go
// v1.56 has no API for it, hence the subjects by hand.
func benchEngineFast(b *testing.B, c *natsjstest.Cluster, replicas int) {
	nc := connect(b, c)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("ENGINE%d", benchRun.Add(1))
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Replicas: replicas, AllowBatchPublish: true})
	if err != nil {
		b.Fatal(err)
	}
	type reply struct {
		Type   string          `json:"type"`
		Seq    uint64          `json:"seq"`
		Stream string          `json:"stream"`
		Error  json.RawMessage `json:"error"`
	}
	replies := make(chan reply, 4096)
	inbox := nats.NewInbox()
	sub, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
		var r reply
		_ = json.Unmarshal(m.Data, &r)
		replies <- r
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	const flow = 500
	payload := make([]byte, 100)
	id := nuid.Next()
	subject := name + ".fast"
	var acked uint64
	handle := func(r reply) bool { // true: the batch's final ack
		switch {
		case len(r.Error) > 0 && string(r.Error) != "null":
			b.Fatalf("fast batch: %s", r.Error)
		case r.Stream != "":
			return true
		case r.Type == "ack":
			acked = max(acked, r.Seq)
		}
		return false
	}
	b.ResetTimer()
	start := time.Now()
	n := uint64(b.N)
	for k := uint64(1); k <= n; k++ {
		op := 1
		switch {
		case k == n:
			op = 2
		case k == 1:
			op = 0
		}
		if err := nc.PublishRequest(subject, fmt.Sprintf("%s.%s.%d.fail.%d.%d.$FI", inbox, id, flow, k, op), payload); err != nil {
			b.Fatal(err)
		}
		for k-acked >= 2*flow {
			select {
			case r := <-replies:
				handle(r)
			case <-ctx.Done():
				b.Fatalf("fast batch: no flow ack after %d of %d", k, n)
			}
		}
	}
	for done := false; !done; {
		select {
		case r := <-replies:
			done = handle(r)
		case <-ctx.Done():
			b.Fatal("fast batch: no commit ack")
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
}
