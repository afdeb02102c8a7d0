package natsjs

import (
	"fmt"
	"math"
	"strconv"
)

// frames builds the protocol frames of one batch, for pubConn: each
// message is
//
//	HPUB <subject> [<reply>] <header bytes> <total bytes>\r\n
//	NATS/1.0\r\n
//	<Key>: <value>\r\n ...      (in the order they were added)
//	\r\n
//	<payload>\r\n
//
// Use: begin, the header lines (line, lineUint, or raw lines appended to
// hdr), then end. Not safe for concurrent use.
type frames struct {
	buf []byte // the frames built and not yet sent
	hdr []byte // the header block of the message being built
}

const hdrLine = "NATS/1.0\r\n"

// begin starts a message's header block.
func (f *frames) begin() { f.hdr = append(f.hdr[:0], hdrLine...) }

func (f *frames) line(key, value string) {
	f.hdr = append(f.hdr, key...)
	f.hdr = append(f.hdr, ": "...)
	f.hdr = append(f.hdr, value...)
	f.hdr = append(f.hdr, "\r\n"...)
}

func (f *frames) lineUint(key string, v uint64) {
	f.hdr = append(f.hdr, key...)
	f.hdr = append(f.hdr, ": "...)
	f.hdr = strconv.AppendUint(f.hdr, v, 10)
	f.hdr = append(f.hdr, "\r\n"...)
}

// fits says why the message being built, with payload, is more than the
// server takes: over max_payload (header block and payload), or a header
// block over 64 KiB.
func (f *frames) fits(payload []byte, maxPayload int) error {
	hdr := len(f.hdr) + 2
	switch {
	case hdr+len(payload) > maxPayload:
		return fmt.Errorf("takes %d bytes with its headers, max_payload %d", hdr+len(payload), maxPayload)
	case hdr > math.MaxUint16:
		return fmt.Errorf("takes %d bytes of headers, the server's limit is %d", hdr, math.MaxUint16)
	}
	return nil
}

// end closes the header block and appends the message's frame to buf.
func (f *frames) end(subject string, reply []byte, payload []byte) {
	f.hdr = append(f.hdr, "\r\n"...)
	b := control(f.buf, "HPUB ", subject, reply)
	b = strconv.AppendInt(b, int64(len(f.hdr)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(f.hdr)+len(payload)), 10)
	b = append(b, "\r\n"...)
	b = append(b, f.hdr...)
	b = append(b, payload...)
	f.buf = append(b, "\r\n"...)
}

// pub appends a frame without headers.
func (f *frames) pub(subject string, reply []byte, payload []byte) {
	b := control(f.buf, "PUB ", subject, reply)
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, "\r\n"...)
	b = append(b, payload...)
	f.buf = append(b, "\r\n"...)
}

// control appends the start of a frame's control line: the operation, the
// subject and the reply subject (if any), each followed by a space.
func control(b []byte, op, subject string, reply []byte) []byte {
	b = append(b, op...)
	b = append(b, subject...)
	b = append(b, ' ')
	if len(reply) > 0 {
		b = append(b, reply...)
		b = append(b, ' ')
	}
	return b
}
