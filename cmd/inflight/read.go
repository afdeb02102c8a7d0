package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
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
	format := fs.String("format", "text", "one line per record: text (key=value, every value quoted) or json (see below)")
	skipDamaged := fs.Bool("skip-damaged", false, "file store: at damage, say what is skipped (the damaged entry: one producer frame) and go on at the next intact entry\nor segment; exit 1 at the end")
	list := fs.Bool("list", false, "list the topics and producers the store holds, one line each with its count of messages, instead of the records")
	follow := fs.Bool("follow", false, "after the records stored, print new ones as they are stored, until interrupted (SIGINT or SIGTERM: exit 0) or -n records")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight read -store file:PATH|nats://HOST:PORT/STREAM [flags]

Prints the records of a store, one line each, in the order they were stored.
A file store is read without a lock and without writing: what was complete
when it started, beside a running serve. A NATS JetStream stream (written by
serve -store nats://...) is read in stream order up to the last message
present when it started.

-follow goes on after the end: it prints new records as they are stored,
until interrupted (exit 0) or -n records were printed. A file store is
followed across its rolls; a segment that retention removed before read
got to it is reported on stderr (and read exits 1 at the end).

-list prints the topics and producers the store holds instead, one line
each with its count of messages, sorted:

  topic="orders" producer="till-1" messages=42

A stream is read under the prefix of its URL (?prefix=P, default
inflight); one that does not capture it is named with the prefix it has,
and read exits 1 rather than print nothing.

-format text prints key=value pairs; every topic, name, key, header and
payload is quoted as Go quotes strings, so no byte can forge a line:

  topic="orders" producer="till-1" seq=1 key="table-7" time=2026-12-03T09:00:00Z header."src"="cli" payload="espresso"

-format json prints one object per line, always with the same fields:
topic, topic_base64, producer, producer_base64, seq, key, key_base64,
event_time, headers (a list of {key, key_base64, value, value_base64}),
payload, payload_base64. Bytes, names included, are there twice: as text
(null when they are not valid UTF-8) and, exactly, in base64 (always set). With jq: .payload for text, .payload_base64 | @base64d for
any bytes. A record without a key has key and key_base64 null.

A damaged file store (an entry that fails its check) is read up to the
damage: every record before it is printed, then read exits 1 naming the
segment and the offset. With -skip-damaged it goes on at the next intact
entry (or the next segment) instead, saying on stderr what it skipped (a
damaged entry holds one producer frame), and exits 1 at the end.
Nothing is ever written to the store.

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
	case isNATSStore(*storeFlag) && *topic == "" && !*list:
		return usageError(fs, stderr, "-topic is required with a nats:// store (-list shows the topics)")
	case *n < 0:
		return usageError(fs, stderr, "-n must not be negative")
	case *format != "text" && *format != "json":
		return usageError(fs, stderr, "-format must be text or json, not %q", *format)
	case *skipDamaged && !isFile:
		return usageError(fs, stderr, "-skip-damaged applies to -store file:PATH only")
	case *follow && *list:
		return usageError(fs, stderr, "-follow prints records: -list does not apply")
	case *follow && *skipDamaged:
		return usageError(fs, stderr, "-follow stops at damage: -skip-damaged does not apply")
	}
	skipped := 0
	scan := func(fn func(topic, producer string, r broker.Record) error) error {
		st, err := file.Open(path, file.ReadOnly(), file.ReadDamaged())
		if err != nil {
			return err
		}
		defer st.Close()
		if !*skipDamaged {
			return st.Scan(fn)
		}
		return st.ScanSkipDamaged(fn, func(e *file.CorruptError) error {
			skipped++
			if e.Next > 0 {
				fmt.Fprintf(stderr, "inflight read: skipped %d bytes of %s from offset %d, damaged (%s); going on at the next intact entry, offset %d\n",
					e.Next-e.Offset, e.Path, e.Offset, e.Why, e.Next)
				return nil
			}
			fmt.Fprintf(stderr, "inflight read: skipped %d bytes of %s from offset %d, damaged (%s); going on with the next segment\n",
				e.Bytes, e.Path, e.Offset, e.Why)
			return nil
		})
	}
	if isNATSStore(*storeFlag) {
		scan = func(fn func(topic, producer string, r broker.Record) error) error {
			return scanNATS(ctx, *storeFlag, *topic, *producer, fn)
		}
	}
	removed := 0
	switch {
	case *follow && isFile:
		scan = func(fn func(topic, producer string, r broker.Record) error) error {
			return followFile(ctx, path, fn, func(err error) {
				removed++
				fmt.Fprintf(stderr, "inflight read: %v\n", err)
			})
		}
	case *follow:
		scan = func(fn func(topic, producer string, r broker.Record) error) error {
			return followNATS(ctx, *storeFlag, *topic, *producer, fn)
		}
	}
	if *list {
		return listStore(ctx, *storeFlag, path, *format, scan, stdout, stderr)
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
	if *follow && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // interrupted: how -follow ends
	}
	if removed > 0 {
		fmt.Fprintf(stderr, "inflight read: %d records printed; retention removed records before they were read (%d times)\n", printed, removed)
		return exitFailure
	}
	if err != nil && !errors.Is(err, errEnough) {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		if ce := (*file.CorruptError)(nil); errors.As(err, &ce) && ce.Sealed {
			fmt.Fprintf(stderr, "inflight read: %d records printed; the segments after %s were not read (-skip-damaged reads them)\n", printed, ce.Path)
		}
		return exitFailure
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "inflight read: %d records printed; %d damaged segments were read only up to their damage\n", printed, skipped)
		return exitFailure
	}
	return exitOK
}

// listStore prints the (topic, producer) pairs of a store, sorted, with
// their message counts (for a file store, records), one line each:
//
//	topic="orders" producer="till-1" messages=42
func listStore(ctx context.Context, storeFlag, path, format string, scan func(func(string, string, broker.Record) error) error, stdout, stderr io.Writer) int {
	var pairs []natsjs.Pair
	var err error
	if isNATSStore(storeFlag) {
		pairs, err = listNATS(ctx, storeFlag)
	} else {
		counts := map[[2]string]uint64{}
		err = scan(func(t, p string, _ broker.Record) error {
			counts[[2]string{t, p}]++
			return ctx.Err()
		})
		for k, n := range counts {
			pairs = append(pairs, natsjs.Pair{Topic: k[0], Producer: k[1], Messages: n})
		}
		slices.SortFunc(pairs, func(a, b natsjs.Pair) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.Producer, b.Producer))
		})
	}
	if err != nil {
		fmt.Fprintf(stderr, "inflight read: %v\n", err)
		return exitFailure
	}
	var b []byte
	for _, p := range pairs {
		b = b[:0]
		if format == "json" {
			out, _ := json.Marshal(struct {
				Topic    string `json:"topic"`
				Producer string `json:"producer"`
				Messages uint64 `json:"messages"`
			}{p.Topic, p.Producer, p.Messages})
			b = append(b, out...)
		} else {
			b = append(b, "topic="...)
			b = strconv.AppendQuote(b, p.Topic)
			b = append(b, " producer="...)
			b = strconv.AppendQuote(b, p.Producer)
			b = append(b, " messages="...)
			b = strconv.AppendUint(b, p.Messages, 10)
		}
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return exitFailure
		}
	}
	if len(pairs) == 0 {
		fmt.Fprintln(stderr, "inflight read: the store holds no records")
	}
	return exitOK
}

// textRecord appends one record as a line of key=value pairs. Every value
// that holds bytes or names from a producer (topic, producer name, key,
// header keys and values, payload) is quoted as Go quotes strings, so that
// no byte (a newline, an escape sequence) can forge a line or act on the
// terminal, and any byte reads back unambiguously:
//
//	topic="orders" producer="till-1" seq=3 key="k" time=2026-12-03T09:00:00Z header."src"="cli" payload="hello"
func textRecord(b []byte, topic, producer string, r broker.Record) []byte {
	b = append(b, "topic="...)
	b = strconv.AppendQuote(b, topic)
	b = append(b, " producer="...)
	b = strconv.AppendQuote(b, producer)
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
		b = strconv.AppendQuote(b, h.Key)
		b = append(b, '=')
		b = strconv.AppendQuote(b, string(h.Value))
	}
	b = append(b, " payload="...)
	b = strconv.AppendQuote(b, string(r.Payload))
	return append(b, '\n')
}

// jsonHeader and jsonLine are a record as JSON: the same fields, under the
// same names, in every line, whatever the bytes, so that a jq filter never
// has to ask which of two fields a record used.
//
// A field that holds bytes (key, a header's value, payload) is there twice:
// as text (key, value, payload), null when the bytes are not valid UTF-8,
// for the common case of text payloads (`jq -r .payload`, or `.payload |
// fromjson` for JSON ones); and exactly, in standard base64 (key_base64,
// value_base64, payload_base64), always set, for any bytes (`.payload_base64
// | @base64d`). A record without a key has both key fields null; one without
// an event time has event_time null; headers is [] when there are none.
// Topics, producer names and header keys are bytes too, and shown the same
// way (topic and topic_base64, producer and producer_base64, a header's key
// and key_base64): two names that differ only in bytes that are not UTF-8
// never print alike.
type jsonHeader struct {
	Key         *string `json:"key"`
	KeyBase64   []byte  `json:"key_base64"`
	Value       *string `json:"value"`
	ValueBase64 []byte  `json:"value_base64"`
}

type jsonLine struct {
	Topic          *string      `json:"topic"`
	TopicBase64    []byte       `json:"topic_base64"`
	Producer       *string      `json:"producer"`
	ProducerBase64 []byte       `json:"producer_base64"`
	Seq            uint64       `json:"seq"`
	Key            *string      `json:"key"`
	KeyBase64      []byte       `json:"key_base64"`
	EventTime      *time.Time   `json:"event_time"`
	Headers        []jsonHeader `json:"headers"`
	Payload        *string      `json:"payload"`
	PayloadBase64  []byte       `json:"payload_base64"`
}

// jsonBytes returns p as text (nil if it is not valid UTF-8) and as the
// bytes of its base64 field (never nil: an empty value is "", not null).
func jsonBytes(p []byte) (*string, []byte) {
	if p == nil {
		p = []byte{}
	}
	if !utf8.Valid(p) {
		return nil, p
	}
	s := string(p)
	return &s, p
}

func jsonRecord(b []byte, topic, producer string, r broker.Record) []byte {
	l := jsonLine{Seq: r.Seq, Headers: make([]jsonHeader, len(r.Headers))}
	l.Topic, l.TopicBase64 = jsonBytes([]byte(topic))
	l.Producer, l.ProducerBase64 = jsonBytes([]byte(producer))
	if r.Key != nil {
		l.Key, l.KeyBase64 = jsonBytes(r.Key)
	}
	if !r.EventTime.IsZero() {
		t := r.EventTime.UTC()
		l.EventTime = &t
	}
	for i, h := range r.Headers {
		l.Headers[i].Key, l.Headers[i].KeyBase64 = jsonBytes([]byte(h.Key))
		l.Headers[i].Value, l.Headers[i].ValueBase64 = jsonBytes(h.Value)
	}
	l.Payload, l.PayloadBase64 = jsonBytes(r.Payload)
	out, _ := json.Marshal(l) // only strings, numbers, bytes and a time: cannot fail
	b = append(b, out...)
	return append(b, '\n')
}
