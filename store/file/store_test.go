package file_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/cpuclock"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// fileRec is one record as Store.Scan reports it.
type fileRec struct {
	Producer string
	Seq      uint64
	Payload  string
}

// fileCall is the arguments of one Store.Append.
type fileCall struct {
	producer string
	first    uint64
	payloads []string
}

func (c fileCall) records() [][]byte { return recs(c.payloads...) }

// fileWant returns the records calls store, in order, and the last seq per
// producer.
func fileWant(calls []fileCall) ([]fileRec, map[string]uint64) {
	var out []fileRec
	last := make(map[string]uint64)
	for _, c := range calls {
		for i, p := range c.payloads {
			out = append(out, fileRec{c.producer, c.first + uint64(i), p})
		}
		last[c.producer] = c.first + uint64(len(c.payloads)) - 1
	}
	return out, last
}

func openFileStore(t testing.TB, path string, opts ...file.Option) *file.Store {
	t.Helper()
	s, err := file.Open(path, opts...)
	require.NoError(t, err)
	return s
}

func fileAppendAll(t testing.TB, s *file.Store, calls []fileCall) {
	t.Helper()
	for _, c := range calls {
		require.NoError(t, s.Append(dflt, c.producer, 0, seqRecs(c.first, c.records())))
	}
}

// fileScanAll returns every record of s, payloads copied.
func fileScanAll(t testing.TB, s *file.Store) []fileRec {
	t.Helper()
	var out []fileRec
	require.NoError(t, s.Scan(func(_, producer string, rec broker.Record) error {
		seq, payload := rec.Seq, rec.Payload
		out = append(out, fileRec{producer, seq, string(payload)})
		return nil
	}))
	return out
}

// checkFileStore asserts that s holds exactly what calls appended.
func checkFileStore(t testing.TB, s *file.Store, calls []fileCall) {
	t.Helper()
	wantRecs, wantLast := fileWant(calls)
	assert.Equal(t, wantRecs, fileScanAll(t, s))
	for name, last := range wantLast {
		got, err := lastSeq(s, dflt, name)
		require.NoError(t, err)
		assert.Equal(t, last, got, "LastSeq(%q)", name)
	}
	got, err := lastSeq(s, dflt, "nobody")
	require.NoError(t, err)
	assert.Zero(t, got)
}

func fileRecovery(calls []fileCall, truncated int64) file.Recovery {
	r := file.Recovery{Entries: len(calls), TruncatedBytes: truncated}
	for _, c := range calls {
		r.Records += len(c.payloads)
	}
	return r
}

// fileRoundTripCalls has several producers, gaps, an empty record and a record
// whose length takes a two-byte uvarint.
var fileRoundTripCalls = []fileCall{
	{"a", 1, []string{"a1", "a2", "a3"}},
	{"b", 10, []string{"b10"}},
	{"a", 7, []string{"a7", ""}},
	{"c", 1, []string{strings.Repeat("c", 300)}},
	{"b", 11, []string{"b11", "b12"}},
	{strings.Repeat("n", 255), 5, []string{"longest name"}},
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	var _ broker.Store = s
	var _ broker.Pinner = s
	assert.Equal(t, file.Recovery{}, s.Recovery())
	checkFileStore(t, s, nil)

	for _, c := range fileRoundTripCalls {
		in := c.records()
		require.NoError(t, s.Append(dflt, c.producer, 0, seqRecs(c.first, in)))
		for _, r := range in { // Append copied: the caller may reuse its buffers
			for i := range r {
				r[i] = '!'
			}
		}
	}
	checkFileStore(t, s, fileRoundTripCalls)
	require.NoError(t, s.Close())

	s = openFileStore(t, path)
	defer s.Close()
	assert.Equal(t, fileRecovery(fileRoundTripCalls, 0), s.Recovery())
	checkFileStore(t, s, fileRoundTripCalls)
}

func TestAppendNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, s.Append(dflt, "a", 0, seqRecs(1, nil)))
	require.NoError(t, s.Append(dflt, "a", 0, seqRecs(0, [][]byte{})), "no records: nothing to check")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	checkFileStore(t, s, nil)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Append(dflt, "a", 0, seqRecs(1, nil)), broker.ErrStoreClosed)
}

func TestAppendRefused(t *testing.T) {
	tests := []struct {
		name     string
		producer string
		first    uint64
		n        int
		big      bool // 1025 records of 1 MiB, sharing one array
	}{
		{name: "empty name", producer: "", first: 10, n: 1},
		{name: "name of 256 bytes", producer: strings.Repeat("n", 256), first: 10, n: 1},
		{name: "first 0", producer: "p", first: 0, n: 1},
		{name: "seqs overflow", producer: "q", first: math.MaxUint64, n: 2},
		{name: "first below last", producer: "p", first: 2, n: 1},
		{name: "first equal to last", producer: "p", first: 3, n: 2},
		{name: "entry over 1 GiB", producer: "p", first: 4, big: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path, file.Fsync(file.FsyncNone))
			defer s.Close()
			ok := []fileCall{{"p", 1, []string{"p1", "p2", "p3"}}}
			fileAppendAll(t, s, ok)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			records := recs(make([]string, tt.n)...)
			if tt.big {
				mib := make([]byte, 1<<20)
				records = make([][]byte, 1025)
				for i := range records {
					records[i] = mib
				}
			}
			err = s.Append(dflt, tt.producer, 0, seqRecs(tt.first, records))
			require.Error(t, err)
			assert.NotErrorIs(t, err, broker.ErrStoreClosed)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing written")

			// The store is still usable.
			ok = append(ok, fileCall{"p", 4, []string{"p4"}}, fileCall{"q", math.MaxUint64, []string{"max"}})
			fileAppendAll(t, s, ok[1:])
			checkFileStore(t, s, ok)
		})
	}
}

// TestAppendFrames: one Append of records from several producer frames,
// as the broker hands them over (Raw set), with records built from their
// fields (Raw nil) among them and sequence IDs that skip within and
// between frames, reads back exactly, an entry per frame, after reopening.
// (TestPlanEntries checks the entries' sizes on random Appends.)
func TestAppendFrames(t *testing.T) {
	at := time.Unix(1700000000, 123456789).UTC()
	var in []broker.Record
	seq := uint64(3)
	for frame := range 4 {
		for i := range 5 {
			r := broker.Record{Seq: seq, Payload: fmt.Appendf(nil, "frame %d record %d", frame, i), FrameStart: i == 0}
			if i == 4 {
				r.Payload = bytes.Repeat(r.Payload, 20) // a body over 127 bytes: a length of two
			}
			if i%2 == 1 {
				r.Key = []byte("k")
				r.Headers = []wire.Header{{Key: "h", Value: []byte{byte(i)}}}
				r.EventTime = at
			}
			if frame%2 == 0 { // as it came in a frame: the fields and their bytes
				r.Raw = wire.AppendRecordBody(nil, r.Payload, r.Key, r.Headers, r.EventTime)
			}
			in = append(in, r)
			seq += []uint64{128, 129, 16384, 16385, 1}[i] // gaps of 127 to 16384 IDs: 1 to 3 bytes
		}
		seq += 1000 // a frame's first record is written with no gap
	}
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	require.NoError(t, s.Append(dflt, "p", 0, in))
	require.NoError(t, s.Close())

	s = openFileStore(t, path, file.Fsync(file.FsyncNone))
	defer s.Close()
	assert.Equal(t, 4, s.Recovery().Entries, "an entry per frame")
	got := broker.NewMemoryStore() // copies the views, headers included
	require.NoError(t, s.Scan(func(topic, producer string, rec broker.Record) error {
		return got.Append(topic, producer, 0, []broker.Record{rec})
	}))
	testkit.RequireSameRecords(t, in, got.TopicRecords(dflt, "p"))
	st, err := s.State(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, in[len(in)-1].Seq, st.LastSeq)
}

// TestAppendUnordered: an Append whose sequence IDs do not increase, within
// a frame or from one frame to the next, is refused and writes nothing;
// the store stays usable; and a fenced epoch is reported before the order,
// as the checks that need the store's state come first.
func TestAppendUnordered(t *testing.T) {
	frames := func(seqs ...uint64) []broker.Record {
		var rs []broker.Record
		for i, seq := range seqs {
			rs = append(rs, broker.Record{Seq: seq, Payload: []byte("x"), FrameStart: i%2 == 0})
		}
		return rs
	}
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	defer s.Close()
	require.NoError(t, s.Append(dflt, "p", 1, frames(1, 2)))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		seqs []uint64
		want string
	}{
		{"within a frame", []uint64{3, 4, 6, 5}, "sequence ID 5 after 6"},
		{"between frames", []uint64{3, 5, 5, 6}, "sequence ID 5 after 5"},
		{"first of several", []uint64{7, 6, 5, 4}, "sequence ID 6 after 7"},
	} {
		err := s.Append(dflt, "p", 1, frames(tt.seqs...))
		require.Error(t, err, tt.name)
		assert.NotErrorIs(t, err, broker.ErrFenced, tt.name)
		assert.Contains(t, err.Error(), tt.want, tt.name)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing written")

	require.NoError(t, s.Fence("p", 2))
	err = s.Append(dflt, "p", 1, frames(3, 5, 4, 6))
	require.ErrorIs(t, err, broker.ErrFenced, "the epoch first")

	require.NoError(t, s.Append(dflt, "p", 2, frames(3, 4)))
	st, err := s.State(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), st.LastSeq)
}

// writeFileStore creates a store at path holding calls, closed.
func writeFileStore(t testing.TB, path string, calls []fileCall) {
	t.Helper()
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	fileAppendAll(t, s, calls)
	require.NoError(t, s.Close())
}

// checkFileRecovered opens the damaged store at path and checks that it holds
// exactly survivors, reporting truncated bytes cut; then that appending
// next and reopening works, and that the file is then byte for byte
// wantFile (if not nil).
func checkFileRecovered(t *testing.T, path string, survivors []fileCall, truncated int64, next fileCall, wantFile []byte) {
	t.Helper()
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	assert.Equal(t, fileRecovery(survivors, truncated), s.Recovery())
	checkFileStore(t, s, survivors)
	require.NoError(t, s.Append(dflt, next.producer, 0, seqRecs(next.first, next.records())))
	require.NoError(t, s.Close())

	all := append(survivors[:len(survivors):len(survivors)], next)
	s = openFileStore(t, path, file.Fsync(file.FsyncNone))
	defer s.Close()
	assert.Equal(t, fileRecovery(all, 0), s.Recovery())
	checkFileStore(t, s, all)
	if wantFile != nil {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, wantFile, got)
	}
}

// checkFileRepaired opens the corrupt store at path, damaged from offset
// off: without Repair it is refused with a CorruptError that says where, and
// left untouched; with Repair the bytes from off are in the side file and
// the store holds exactly survivors. Then as checkFileRecovered.
func checkFileRepaired(t *testing.T, path string, off int64, survivors []fileCall, next fileCall, wantFile []byte) {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := file.Open(path)
	require.ErrorIs(t, err, file.ErrCorrupt)
	require.Nil(t, s)
	var ce *file.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, off, ce.Offset)
	assert.Equal(t, int64(len(before))-off, ce.Bytes)
	assert.Contains(t, err.Error(), "corrupt")
	assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", off))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused file is left untouched")

	s = openFileStore(t, path, file.Fsync(file.FsyncNone), file.Repair())
	rec := s.Recovery()
	want := fileRecovery(survivors, 0)
	want.RepairedBytes, want.SideFile = int64(len(before))-off, path+fmt.Sprintf(".corrupt-%d", off)
	assert.Equal(t, want, rec)
	side, err := os.ReadFile(rec.SideFile)
	require.NoError(t, err)
	assert.Equal(t, before[off:], side, "the damaged remainder, byte for byte")
	require.NoError(t, s.Close())
	checkFileRecovered(t, path, survivors, 0, next, wantFile)
}

func TestTornTail(t *testing.T) {
	calls := []fileCall{
		{"a", 1, []string{"a1", "a2"}},
		{"b", 1, []string{"b1"}},
		{"a", 5, []string{"a5"}},
		{"a", 9, []string{"a9", "a10"}}, // the entry we damage: a's last falls back to 5
	}
	survivors, last := calls[:len(calls)-1], calls[len(calls)-1]
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	writeFileStore(t, ref, survivors)
	st, err := os.Stat(ref)
	require.NoError(t, err)
	lastStart := int(st.Size())
	writeFileStore(t, ref, calls[len(calls)-1:]) // reopens and appends the last entry
	full, err := os.ReadFile(ref)
	require.NoError(t, err)
	require.Greater(t, len(full), lastStart+8)

	t.Run("cut", func(t *testing.T) {
		for cut := lastStart; cut < len(full); cut++ {
			t.Run(fmt.Sprint(cut-lastStart), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "store")
				require.NoError(t, os.WriteFile(path, full[:cut], 0o600))
				// Appending the lost entry again restores the file exactly.
				checkFileRecovered(t, path, survivors, int64(cut-lastStart), last, full)
			})
		}
	})
	t.Run("flip", func(t *testing.T) {
		// A last entry that does not check out, with no intact entry after
		// it, is a torn tail (see recover.go) and cut; unless only its
		// length is damaged and the rest checks out to the end: an intact
		// entry, refused, or repaired to a side file.
		for i := lastStart; i < len(full); i++ {
			t.Run(fmt.Sprint(i-lastStart), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "store")
				damaged := bytes.Clone(full)
				damaged[i] ^= 0xff
				require.NoError(t, os.WriteFile(path, damaged, 0o600))
				if i < lastStart+4 {
					checkFileRepaired(t, path, int64(lastStart), survivors, last, full)
					return
				}
				checkFileRecovered(t, path, survivors, int64(len(full)-lastStart), last, full)
			})
		}
	})

	hdr := func(bodyLen, crc uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, bodyLen), crc)
	}
	lastEntry := full[lastStart:]
	badCRC := bytes.Clone(lastEntry)
	badCRC[5] ^= 1
	garbage := []struct {
		name    string
		bytes   []byte
		corrupt bool // not what a crash leaves: refused, or repaired
	}{
		{"one byte", []byte{0}, false},
		{"seven zeros", make([]byte, 7), false},
		{"zero header", make([]byte, 8), false},
		{"zero page", make([]byte, 4096), false},
		// Unreadable to the end with no intact entry after: a torn tail.
		{"huge length", append(hdr(math.MaxUint32, 0), "body"...), false},
		{"length over the limit", append(hdr(1<<30+1, 0), make([]byte, 64)...), false},
		{"length past the end", append(hdr(1000, 0), make([]byte, 100)...), false},
		{"entry with a bad crc", badCRC, false},
		{"entry with a damaged length", append(hdr(1<<30+1, binary.BigEndian.Uint32(lastEntry[4:])), lastEntry[8:]...), true},
		{"entry then a torn one", append(bytes.Clone(lastEntry), lastEntry[:len(lastEntry)-1]...), false},
		{"torn entry then a valid one", append(bytes.Clone(lastEntry[:len(lastEntry)-1]), lastEntry...), true},
	}
	for _, g := range garbage {
		t.Run("garbage/"+g.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			require.NoError(t, os.WriteFile(path, append(bytes.Clone(full), g.bytes...), 0o600))
			if g.corrupt {
				checkFileRepaired(t, path, int64(len(full)), calls, fileCall{"b", 2, []string{"after"}}, nil)
				return
			}
			survivors := calls
			truncated := int64(len(g.bytes))
			if g.name == "entry then a torn one" {
				// The copy of the last entry is a valid entry (the store does
				// not check the producer's seqs on replay: it keeps the max).
				survivors = append(calls[:len(calls):len(calls)], last)
				truncated = int64(len(lastEntry) - 1)
			}
			checkFileRecovered(t, path, survivors, truncated, fileCall{"b", 2, []string{"after"}}, nil)
		})
	}
}

// fileEntry frames body as a store entry with a correct CRC.
func fileEntry(body []byte) []byte {
	e := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	e = binary.BigEndian.AppendUint32(e, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return append(e, body...)
}

// fileBody builds an entry body: nameLen, name, first, count, then rest.
func fileBody(name string, first uint64, count uint32, rest ...byte) []byte {
	b := append([]byte{byte(len(name))}, name...)
	b = binary.BigEndian.AppendUint64(b, first)
	b = binary.BigEndian.AppendUint32(b, count)
	return append(b, rest...)
}

func TestMalformedTail(t *testing.T) {
	// Entries whose CRC is right but whose body is not: not what a crash
	// leaves, so corruption.
	good := fileBody("b", 2, 2, 1, 'x', 0)
	require.Len(t, good, 17)
	tests := []struct {
		name string
		body []byte
	}{
		{"control: well formed", good},
		{"empty name", append([]byte{0, 'b'}, good[2:]...)},
		{"name past the end", append([]byte{200}, good[1:]...)},
		{"first 0", fileBody("b", 0, 2, 1, 'x', 0)},
		{"count 0", fileBody("b", 2, 0, 1, 'x', 0)},
		{"seqs overflow", fileBody("b", math.MaxUint64, 2, 1, 'x', 0)},
		{"fewer records than count", fileBody("b", 2, 3, 1, 'x', 0)},
		{"bytes after the records", fileBody("b", 2, 1, 1, 'x', 0)},
		{"record past the end", fileBody("b", 2, 2, 1, 'x', 5)},
		{"bad uvarint", fileBody("b", 2, 2, 0x80, 0x80, 0x80)},
	}
	calls := []fileCall{{"a", 1, []string{"a1"}}, {"b", 1, []string{"b1"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			writeFileStore(t, path, calls)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(fileEntry(tt.body))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			if bytes.Equal(tt.body, good) {
				survivors := append(calls[:len(calls):len(calls)], fileCall{"b", 2, []string{"x", ""}})
				checkFileRecovered(t, path, survivors, 0, fileCall{"b", 4, []string{"after"}}, nil)
				return
			}
			st, err := os.Stat(path)
			require.NoError(t, err)
			checkFileRepaired(t, path, st.Size()-int64(8+len(tt.body)), calls, fileCall{"b", 2, []string{"after"}}, nil)
		})
	}
}

func TestScanCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	defer s.Close()
	fileAppendAll(t, s, fileRoundTripCalls)
	// Damage the second entry behind the store's back: it starts after the
	// file header (8) and the first entry (8 + 1+1+8+4 + 3*(1+2)).
	second := int64(8 + 8 + 14 + 9)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{'!'}, second+8+1+1+8+4+1) // its first payload byte
	require.NoError(t, err)
	require.NoError(t, f.Close())
	n := 0
	err = s.Scan(func(string, string, broker.Record) error { n++; return nil })
	require.ErrorIs(t, err, file.ErrCorrupt)
	assert.Equal(t, 3, n, "the records of the first entry")
}

func TestCloseDuringScan(t *testing.T) {
	s := openFileStore(t, filepath.Join(t.TempDir(), "store"), file.Fsync(file.FsyncNone))
	big := bytes.Repeat([]byte{'x'}, 1000)
	for i := range 200 { // 200 kB: more than Scan reads ahead
		require.NoError(t, s.Append(dflt, "p", 0, seqRecs(uint64(i+1), [][]byte{big})))
	}
	n := 0
	err := s.Scan(func(string, string, broker.Record) error {
		n++
		if n == 1 {
			return s.Close()
		}
		return nil
	})
	require.ErrorIs(t, err, broker.ErrStoreClosed)
	assert.Less(t, n, 200)
}

func TestForeignFile(t *testing.T) {
	version8 := append([]byte("IFLT"), 0, 0, 0, 8) // 7 is a rolled segment
	tests := []struct {
		name    string
		content []byte
	}{
		{"text", []byte("hello, this is somebody's file\n")},
		{"newer version", append(version8, make([]byte, 40)...)},
		{"short, not our header", []byte("IFX")},
		{"zeros past a header's worth", make([]byte, 40)},
		{"magic only", []byte("IFLT\x00\x00\x01\x01")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			require.NoError(t, os.WriteFile(path, tt.content, 0o644))
			s, err := file.Open(path)
			require.ErrorIs(t, err, file.ErrCorrupt)
			assert.Nil(t, s)
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tt.content, got, "file untouched")
		})
	}

	t.Run("directory", func(t *testing.T) {
		s, err := file.Open(t.TempDir())
		require.Error(t, err)
		assert.Nil(t, s)
	})
}

func TestInterruptedCreation(t *testing.T) {
	// A crash while the header was being written leaves a prefix of it,
	// or its size without its page: zeros.
	for _, content := range []string{"", "I", "IFLT", "IFLT\x00\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00"} {
		t.Run(fmt.Sprintf("%q", content), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			calls := []fileCall{{"a", 1, []string{"x"}}}
			checkFileRecovered(t, path, nil, 0, calls[0], nil)
		})
	}
}

func TestCreatesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	require.NoError(t, s.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []byte("IFLT\x00\x00\x00\x06"), got)
	_, err = file.Open(filepath.Join(t.TempDir(), "no", "such", "dir"))
	require.Error(t, err)
}

// TestAsBrokerStore: a producer's records go through a broker into the
// file; after a restart (a new broker on the reopened file) the producer's
// name continues from its last stored sequence ID, what was stored is not
// stored again, and a closed store is reported to the producer as
// unavailable.
func TestAsBrokerStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	fs := openFileStore(t, path)
	send := func(fs *file.Store, payloads ...string) (*core.Producer, *testkit.ErrLog) {
		b, err := broker.New(fs)
		require.NoError(t, err)
		d := mem.NewDialer(b)
		p, log := testkit.NewProducer(t, d, d.Close, "p", core.SendTimeout(time.Second))
		for _, pl := range payloads {
			_, err := p.Send(context.Background(), &core.Message{Payload: []byte(pl)})
			require.NoError(t, err)
		}
		return p, log
	}
	p, _ := send(fs, "a", "b", "c")
	require.NoError(t, p.Close(context.Background()))
	require.NoError(t, fs.Close())

	// Restart: a new broker on the reopened file.
	fs = openFileStore(t, path)
	defer fs.Close()
	assert.Equal(t, file.Recovery{Entries: 3, Records: 3}, fs.Recovery())
	last, err := lastSeq(fs, dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), last)
	p, log := send(fs, "d")
	assert.Equal(t, []fileRec{{"p", 1, "a"}, {"p", 2, "b"}, {"p", 3, "c"}, {"p", 4, "d"}}, fileScanAll(t, fs))

	// A closed store fails the producer's session with an ERROR saying the
	// store is unavailable; its message times out.
	require.NoError(t, fs.Close())
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("e")})
	require.ErrorIs(t, err, core.ErrTimeout)
	var remote *wire.RemoteError
	require.NotNil(t, log.Find(func(err error) bool {
		return errors.As(err, &remote) && remote.Code == wire.CodeStoreUnavailable
	}), "the producer heard why: %v", log.Snapshot())
}

func TestPolicies(t *testing.T) {
	for _, p := range []file.FsyncPolicy{file.FsyncNone, file.FsyncBatch, file.FsyncInterval} {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path, file.Fsync(p), file.FsyncEvery(time.Millisecond))
			var calls []fileCall
			for i := range 5 {
				c := fileCall{"p", uint64(1 + 2*i), []string{fmt.Sprint("r", i), "second"}}
				require.NoError(t, s.Append(dflt, c.producer, 0, seqRecs(c.first, c.records())))
				calls = append(calls, c)
				if p == file.FsyncInterval {
					// Not needed for the outcome: lets the background fsync
					// run between appends, for the race detector to see.
					time.Sleep(2 * time.Millisecond)
				}
			}
			checkFileStore(t, s, calls)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "Close is idempotent")

			require.ErrorIs(t, s.Append(dflt, "p", 0, seqRecs(100, recs("late"))), broker.ErrStoreClosed)
			_, err := lastSeq(s, dflt, "p")
			require.ErrorIs(t, err, broker.ErrStoreClosed)
			require.ErrorIs(t, s.Scan(func(string, string, broker.Record) error { return nil }), broker.ErrStoreClosed)

			s = openFileStore(t, path)
			defer s.Close()
			assert.Equal(t, fileRecovery(calls, 0), s.Recovery())
			checkFileStore(t, s, calls)
		})
	}
}

func TestConcurrentAppends(t *testing.T) {
	const producers, appends, perAppend = 8, 50, 3
	for _, p := range []file.FsyncPolicy{file.FsyncNone, file.FsyncBatch, file.FsyncInterval} {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path, file.Fsync(p), file.FsyncEvery(time.Millisecond))

			// A reader scans while the writers append: per producer it must
			// always see seqs 1, 2, 3, ... with no gap.
			stopScan := make(chan struct{})
			scanErr := make(chan error, 1)
			go func() {
				scanErr <- func() error {
					for {
						select {
						case <-stopScan:
							return nil
						default:
						}
						next := make(map[string]uint64)
						err := s.Scan(func(_, producer string, rec broker.Record) error {
							seq, payload := rec.Seq, rec.Payload
							if seq != next[producer]+1 || string(payload) != fmt.Sprint(producer, "/", seq) {
								return fmt.Errorf("%s: seq %d payload %q after %d", producer, seq, payload, next[producer])
							}
							next[producer] = seq
							return nil
						})
						if err != nil {
							return err
						}
					}
				}()
			}()

			var wg sync.WaitGroup
			errs := make(chan error, producers*appends)
			for i := range producers {
				name := fmt.Sprint("p", i)
				wg.Go(func() {
					for j := range appends {
						first := uint64(j*perAppend + 1)
						batch := make([][]byte, perAppend)
						for k := range batch {
							batch[k] = fmt.Append(nil, name, "/", first+uint64(k))
						}
						if err := s.Append(dflt, name, 0, seqRecs(first, batch)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(stopScan)
			require.NoError(t, <-scanErr)
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}

			check := func(s *file.Store) {
				got := make(map[string][]uint64)
				for _, r := range fileScanAll(t, s) {
					require.Equal(t, fmt.Sprint(r.Producer, "/", r.Seq), r.Payload)
					got[r.Producer] = append(got[r.Producer], r.Seq)
				}
				require.Len(t, got, producers)
				for name, seqs := range got {
					assert.Equal(t, seqRange(1, appends*perAppend), seqs, name)
					last, err := lastSeq(s, dflt, name)
					require.NoError(t, err)
					assert.Equal(t, uint64(appends*perAppend), last)
				}
			}
			check(s)
			require.NoError(t, s.Close())
			s = openFileStore(t, path)
			defer s.Close()
			assert.Equal(t, file.Recovery{Entries: producers * appends, Records: producers * appends * perAppend}, s.Recovery())
			check(s)
		})
	}
}

func TestCloseDuringAppends(t *testing.T) {
	// Every Append that returned nil before, during or after Close is in
	// the file; the others returned ErrStoreClosed.
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.Fsync(file.FsyncBatch))
	const writers = 4
	acked := make([]uint64, writers) // last acknowledged seq per writer
	var wg sync.WaitGroup
	started := make(chan struct{}, writers)
	for i := range writers {
		wg.Go(func() {
			name := fmt.Sprint("w", i)
			for seq := uint64(1); ; seq++ {
				err := s.Append(dflt, name, 0, seqRecs(seq, recs("x")))
				if errors.Is(err, broker.ErrStoreClosed) {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				acked[i] = seq
				if seq == 3 {
					started <- struct{}{}
				}
			}
		})
	}
	for range writers {
		<-started
	}
	require.NoError(t, s.Close())
	wg.Wait()

	s = openFileStore(t, path)
	defer s.Close()
	for i, want := range acked {
		got, err := lastSeq(s, dflt, fmt.Sprint("w", i))
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

func TestScanStops(t *testing.T) {
	s := openFileStore(t, filepath.Join(t.TempDir(), "store"), file.Fsync(file.FsyncNone))
	defer s.Close()
	fileAppendAll(t, s, fileRoundTripCalls)
	stop := errors.New("stop")
	calls := 0
	err := s.Scan(func(string, string, broker.Record) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	assert.Same(t, stop, err)
	assert.Equal(t, 2, calls)

	// fn may append: the scan sees only what existed when it started.
	n := 0
	require.NoError(t, s.Scan(func(string, string, broker.Record) error {
		n++
		return s.Append(dflt, "during", 0, seqRecs(uint64(n), recs("d")))
	}))
	wantRecs, _ := fileWant(fileRoundTripCalls)
	assert.Equal(t, len(wantRecs), n)
	last, err := lastSeq(s, dflt, "during")
	require.NoError(t, err)
	assert.Equal(t, uint64(n), last)
}

func TestParseFsyncPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    file.FsyncPolicy
		wantErr bool
	}{
		{in: "none", want: file.FsyncNone},
		{in: "batch", want: file.FsyncBatch},
		{in: "interval", want: file.FsyncInterval},
		{in: "", wantErr: true},
		{in: "Batch", wantErr: true},
		{in: " none", wantErr: true},
		{in: "always", wantErr: true},
		{in: "FsyncPolicy(3)", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := file.ParseFsyncPolicy(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, file.ErrInvalidOption)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
		})
	}
	assert.Equal(t, "FsyncPolicy(3)", file.FsyncPolicy(3).String())
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []file.Option
	}{
		{"FsyncEvery(0)", []file.Option{file.FsyncEvery(0)}},
		{"FsyncEvery(-1s)", []file.Option{file.Fsync(file.FsyncInterval), file.FsyncEvery(-time.Second)}},
		{"Fsync(3)", []file.Option{file.Fsync(3)}},
		{"Fsync(-1)", []file.Option{file.Fsync(-1)}},
		{"nil", []file.Option{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s, err := file.Open(path, tt.opts...)
			require.ErrorIs(t, err, file.ErrInvalidOption)
			assert.Nil(t, s)
			assert.NoFileExists(t, path, "options are checked before the file is touched")
		})
	}
}

// BenchmarkAppend: one Append of 100 records of 100 bytes (one
// batch) under each fsync policy; compare the policies within one run.
func BenchmarkAppend(b *testing.B) {
	const n, size = 100, 100
	records := make([][]byte, n)
	for i := range records {
		records[i] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	for _, p := range []file.FsyncPolicy{file.FsyncNone, file.FsyncInterval, file.FsyncBatch} {
		b.Run(p.String(), func(b *testing.B) {
			s := openFileStore(b, filepath.Join(b.TempDir(), "store"), file.Fsync(p))
			defer s.Close()
			b.SetBytes(n * size)
			b.ReportAllocs()
			seq := uint64(1)
			for b.Loop() {
				if err := s.Append(dflt, "bench", 0, seqRecs(seq, records)); err != nil {
					b.Fatal(err)
				}
				seq += n
			}
			b.ReportMetric(float64(seq-1)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkAppendFrames: Appends as the broker makes them behind a slow
// store, each of 4 producer frames of 4096 records of 100 bytes (Raw set,
// FrameStart on each frame's first), FsyncNone; the CPU per record is the
// store's encoding and its write into the page cache (and the loop's own
// numbering of the records, a store per record). BenchmarkEncodeEntries
// has the encoding alone.
func BenchmarkAppendFrames(b *testing.B) {
	const frames, perFrame = 4, 4096
	recs := make([]broker.Record, frames*perFrame)
	raw := wire.AppendRecordBody(nil, bytes.Repeat([]byte{'x'}, 100), nil, nil, time.Time{})
	for i := range recs {
		recs[i] = broker.Record{Payload: raw[1:], Raw: raw, FrameStart: i%perFrame == 0}
	}
	s := openFileStore(b, filepath.Join(b.TempDir(), "store"), file.Fsync(file.FsyncNone))
	defer s.Close()
	b.SetBytes(int64(len(recs)) * 100)
	b.ReportAllocs()
	cpu0, haveCPU := cpuclock.Process()
	seq := uint64(1)
	for b.Loop() {
		for i := range recs {
			recs[i].Seq = seq
			seq++
		}
		if err := s.Append(dflt, "bench", 0, recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq-1)/b.Elapsed().Seconds(), "records/s")
	if cpu1, ok := cpuclock.Process(); ok && haveCPU {
		b.ReportMetric(float64(cpu1-cpu0)/float64(seq-1), "cpu-ns/record")
	}
}
