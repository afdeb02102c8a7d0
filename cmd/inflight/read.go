package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
)

// errEnough stops a scan once -n records were printed.
var errEnough = errors.New("enough")

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	storeFlag := fs.String("store", "", "the store to read (required): file:PATH (opened read-only, also while serve runs on it), or\n"+
		"nats://HOST:PORT[,HOST:PORT...]/STREAM[?prefix=P&creds=FILE&tls_ca=FILE&...] (a JetStream stream; needs -topic)")
	topic := fs.String("topic", "", "only this topic (empty: all; required with a nats:// store)")
	producer := fs.String("producer", "", "only this producer name (empty: all)")
	from := fs.Uint64("from", 0, "only sequence IDs from this one on")
	n := fs.Int("n", 0, "at most this many records (0: all)")
	format := fs.String("format", "text", "one line per record: text (key=value) or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight read -store file:PATH|nats://HOST:PORT/STREAM [flags]

Prints the records of a store, one line each, in the order they were stored.
A file store is read without a lock and without writing: what was complete
when it started, beside a running serve. A NATS JetStream stream (written by
serve -store nats://...) is read in stream order up to the last message
present when it started.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	path, isFile := strings.CutPrefix(*storeFlag, "file:")
	switch {
	case (!isFile || path == "") && !isNATSStore(*storeFlag):
		return usageError(fs, stderr, "-store must be file:PATH or nats://HOST:PORT/STREAM, not %q", *storeFlag)
	case isNATSStore(*storeFlag) && *topic == "":
		return usageError(fs, stderr, "-topic is required with a nats:// store")
	case *n < 0:
		return usageError(fs, stderr, "-n must not be negative")
	case *format != "text" && *format != "json":
		return usageError(fs, stderr, "-format must be text or json, not %q", *format)
	}
	scan := func(fn func(topic, producer string, r broker.Record) error) error {
		st, err := broker.OpenFileStore(path, broker.ReadOnly())
		if err != nil {
			return err
		}
		defer st.Close()
		return st.Scan(fn)
	}
	if isNATSStore(*storeFlag) {
		scan = func(fn func(topic, producer string, r broker.Record) error) error {
			return scanNATS(ctx, *storeFlag, *topic, *producer, fn)
		}
	}
	line := textRecord
	if *format == "json" {
		line = jsonRecord
	}
	var buf []byte
	printed := 0
	err := scan(func(t, p string, r broker.Record) error {
		if (*topic != "" && t != *topic) || (*producer != "" && p != *producer) || r.Seq < *from {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = line(buf[:0], t, p, r)
		if _, err := stdout.Write(buf); err != nil {
			return err
		}
		if printed++; printed == *n {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, natsjs.ErrInvalidConfig) {
		return usageError(fs, stderr, "-store: %v", err)
	}
	if err != nil && !errors.Is(err, errEnough) {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// textRecord appends one record as a line of key=value pairs; strings are
// quoted as Go quotes them, so any byte reads back unambiguously:
//
//	topic=orders producer=till-1 seq=3 key="k" time=2026-12-03T09:00:00Z header.src="cli" payload="hello"
func textRecord(b []byte, topic, producer string, r broker.Record) []byte {
	b = append(b, "topic="...)
	b = append(b, topic...)
	b = append(b, " producer="...)
	b = append(b, producer...)
	b = append(b, " seq="...)
	b = strconv.AppendUint(b, r.Seq, 10)
	if r.Key != nil {
		b = append(b, " key="...)
		b = strconv.AppendQuote(b, string(r.Key))
	}
	if !r.EventTime.IsZero() {
		b = append(b, " time="...)
		b = r.EventTime.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	for _, h := range r.Headers {
		b = append(b, " header."...)
		b = append(b, h.Key...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, string(h.Value))
	}
	b = append(b, " payload="...)
	b = strconv.AppendQuote(b, string(r.Payload))
	return append(b, '\n')
}

// jsonHeader and jsonLine are a record as JSON. Bytes that are valid UTF-8
// are strings; others go in the _base64 field instead.
type jsonHeader struct {
	Key         string `json:"key"`
	Value       string `json:"value,omitempty"`
	ValueBase64 []byte `json:"value_base64,omitempty"`
}

type jsonLine struct {
	Topic         string       `json:"topic"`
	Producer      string       `json:"producer"`
	Seq           uint64       `json:"seq"`
	Key           *string      `json:"key,omitempty"`
	KeyBase64     []byte       `json:"key_base64,omitempty"`
	EventTime     *time.Time   `json:"event_time,omitempty"`
	Headers       []jsonHeader `json:"headers,omitempty"`
	Payload       *string      `json:"payload,omitempty"`
	PayloadBase64 []byte       `json:"payload_base64,omitempty"`
}

// jsonBytes sets one of a string and a base64 field from p.
func jsonBytes(p []byte, s **string, b64 *[]byte) {
	if utf8.Valid(p) {
		v := string(p)
		*s = &v
	} else {
		*b64 = p
	}
}

func jsonRecord(b []byte, topic, producer string, r broker.Record) []byte {
	l := jsonLine{Topic: topic, Producer: producer, Seq: r.Seq}
	if r.Key != nil {
		jsonBytes(r.Key, &l.Key, &l.KeyBase64)
	}
	if !r.EventTime.IsZero() {
		t := r.EventTime.UTC()
		l.EventTime = &t
	}
	for _, h := range r.Headers {
		jh := jsonHeader{Key: h.Key}
		if utf8.Valid(h.Value) {
			jh.Value = string(h.Value)
		} else {
			jh.ValueBase64 = h.Value
		}
		l.Headers = append(l.Headers, jh)
	}
	jsonBytes(r.Payload, &l.Payload, &l.PayloadBase64)
	out, _ := json.Marshal(l) // only strings, numbers, bytes and a time: cannot fail
	b = append(b, out...)
	return append(b, '\n')
}
