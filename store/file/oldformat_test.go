package file_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// The formats of older inflight versions, made from what this one writes:
// what the tests of the upgrades and the fuzz seeds start from.

// oldSnapshot rewrites the snapshot that starts a rolled segment's entries
// (kind 3: streams, then names' epochs and the epoch counter) as an older
// store wrote it: kind 1 (version 3, no epochs) or kind 2 (version 5, an
// epoch per (topic, producer): each stream gets its name's epoch, and a
// name with an epoch and no stream a stream of the default topic without
// records). What follows the snapshot is kept.
func oldSnapshot(t testing.TB, seg []byte, kind byte) []byte {
	t.Helper()
	n := binary.BigEndian.Uint32(seg)
	body := seg[8 : 8+n]
	require.Equal(t, byte(3), body[0], "a snapshot with names")
	type streamRec struct {
		topic, name string
		last, seen  uint64
	}
	var streams []streamRec
	p := body[1+8+16:]
	count := binary.BigEndian.Uint32(p)
	p = p[4:]
	for range count {
		topic := string(p[1 : 1+p[0]])
		p = p[1+p[0]:]
		name := string(p[1 : 1+p[0]])
		p = p[1+p[0]:]
		streams = append(streams, streamRec{topic, name, binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])})
		p = p[16:]
	}
	epochs := map[string][2]uint64{}
	count = binary.BigEndian.Uint32(p)
	p = p[4:]
	for range count {
		name := string(p[1 : 1+p[0]])
		p = p[1+p[0]:]
		epochs[name] = [2]uint64{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])}
		p = p[16:]
	}
	require.Empty(t, p)
	if kind == 2 {
		for name, e := range epochs {
			found := false
			for _, s := range streams {
				found = found || s.name == name
			}
			if !found && e[0] > 0 {
				streams = append(streams, streamRec{dflt, name, 0, e[1]})
			}
		}
	}
	out := append([]byte{kind}, body[1:9]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(streams)))
	for _, s := range streams {
		if kind == 1 {
			require.Zero(t, epochs[s.name][0], "no epoch before epochs")
		}
		out = append(out, byte(len(s.topic)))
		out = append(out, s.topic...)
		out = append(out, byte(len(s.name)))
		out = append(out, s.name...)
		out = binary.BigEndian.AppendUint64(out, s.last)
		out = binary.BigEndian.AppendUint64(out, s.seen)
		if kind == 2 {
			out = binary.BigEndian.AppendUint64(out, epochs[s.name][0])
		}
	}
	return append(fileEntry(out), seg[8+n:]...)
}

// oldFences rewrites every name fence entry (kind 2) of a segment's
// entries as a version 4 store wrote it: a fence of (topic, producer), kind
// 1, for the given topic.
func oldFences(t testing.TB, seg []byte, topic string) []byte {
	t.Helper()
	var out []byte
	for len(seg) > 0 {
		n := binary.BigEndian.Uint32(seg)
		body := seg[8 : 8+n]
		if len(body) > 2 && body[0] == 0 && body[1] == 0 && body[2] == 2 {
			old := append([]byte{0, 0, 1, byte(len(topic))}, topic...)
			body = append(old, body[3:]...)
			out = append(out, fileEntry(body)...)
		} else {
			out = append(out, seg[:8+n]...)
		}
		seg = seg[8+n:]
	}
	return out
}
