package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
)

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	storeFlag := fs.String("store", "", "nats://HOST:PORT[,HOST:PORT...]/STREAM[?prefix=P&creds=FILE&tls_ca=FILE&...] (required)")
	topic := fs.String("topic", "", "the topic to read (required)")
	producer := fs.String("producer", "", "only this producer's records (default: every producer of the topic)")
	from := fs.Uint64("from", 0, "only records with a sequence ID at least this (with -producer)")
	format := fs.String("format", "text", "text (one line per record) or json (JSON lines)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight read -store nats://HOST:PORT/STREAM -topic T [flags]

Prints the records stored in a NATS JetStream stream by inflight serve
-store nats://... (or an embedded broker on the natsjs store), in stream
order, up to the last one present when it starts.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	switch {
	case !isNATSStore(*storeFlag):
		return usageError(fs, stderr, "-store must be nats://HOST:PORT/STREAM, not %q", *storeFlag)
	case *topic == "":
		return usageError(fs, stderr, "-topic is required")
	case *from > 0 && *producer == "":
		return usageError(fs, stderr, "-from needs -producer (sequence IDs are per producer)")
	case *format != "text" && *format != "json":
		return usageError(fs, stderr, "-format must be text or json, not %q", *format)
	}
	nc, cfg, err := natsjs.Dial(*storeFlag)
	if errors.Is(err, natsjs.ErrInvalidConfig) {
		return usageError(fs, stderr, "-store: %v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		return exitFailure
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		return exitFailure
	}
	filter := natsjs.TopicSubjects(cfg.Prefix, *topic)
	if *producer != "" {
		filter = natsjs.Subject(cfg.Prefix, *topic, *producer)
	}
	enc := json.NewEncoder(stdout)
	err = natsjs.Read(ctx, js, cfg.Stream, filter, func(subject string, _ uint64, r broker.Record) error {
		if r.Seq < *from {
			return nil
		}
		_, prod, _ := natsjs.ParseSubject(cfg.Prefix, subject)
		if *format == "json" {
			return enc.Encode(jsonRecord(*topic, prod, r))
		}
		_, err := fmt.Fprintln(stdout, textRecord(prod, r))
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// textRecord is one line: producer, sequence ID, the metadata present, and
// the payload, each quoted when it is not plain text.
func textRecord(producer string, r broker.Record) string {
	line := fmt.Sprintf("%s %d", strconv.Quote(producer), r.Seq)
	if r.Key != nil {
		line += " key=" + strconv.Quote(string(r.Key))
	}
	if !r.EventTime.IsZero() {
		line += " time=" + r.EventTime.UTC().Format(time.RFC3339Nano)
	}
	for _, h := range r.Headers {
		line += " " + strconv.Quote(h.Key) + "=" + strconv.Quote(string(h.Value))
	}
	return line + " " + strconv.Quote(string(r.Payload))
}

// jsonLine is one record as a JSON line. Bytes that are valid UTF-8 are
// strings; others are base64 in the _b64 field instead.
type jsonLine struct {
	Topic      string       `json:"topic"`
	Producer   string       `json:"producer"`
	Seq        uint64       `json:"seq"`
	Key        *string      `json:"key,omitempty"`
	KeyB64     []byte       `json:"key_b64,omitempty"`
	EventTime  *time.Time   `json:"event_time,omitempty"`
	Headers    []jsonHeader `json:"headers,omitempty"`
	Payload    *string      `json:"payload,omitempty"`
	PayloadB64 []byte       `json:"payload_b64,omitempty"`
}

type jsonHeader struct {
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`
	ValueB64 []byte  `json:"value_b64,omitempty"`
}

func jsonRecord(topic, producer string, r broker.Record) jsonLine {
	l := jsonLine{Topic: topic, Producer: producer, Seq: r.Seq}
	if r.Key != nil {
		l.Key, l.KeyB64 = textOrBytes(r.Key)
	}
	if !r.EventTime.IsZero() {
		t := r.EventTime.UTC()
		l.EventTime = &t
	}
	for _, h := range r.Headers {
		jh := jsonHeader{Key: h.Key}
		jh.Value, jh.ValueB64 = textOrBytes(h.Value)
		l.Headers = append(l.Headers, jh)
	}
	l.Payload, l.PayloadB64 = textOrBytes(r.Payload)
	return l
}

func textOrBytes(b []byte) (*string, []byte) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	return nil, b
}
