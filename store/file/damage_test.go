package file_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/wire"
)

// storedEntry is one Append as it lies in a store file.
type storedEntry struct {
	start, end      int64 // its bytes in the file
	topic, producer string
	recs            []storedRec
}

type storedRec struct {
	seq              uint64
	payload, key     string
	eventTimeUnixNs  int64
	headerKey, value string
}

// writeDamageFixture appends n random entries (two topics, three producers,
// payloads of 0 to 120 bytes, some with metadata) to a new store at path and
// returns them with their offsets.
func writeDamageFixture(t *testing.T, path string, n int, rng *rand.Rand) []storedEntry {
	t.Helper()
	s := openFileStore(t, path, file.Fsync(file.FsyncNone))
	defer func() { require.NoError(t, s.Close()) }()
	next := map[[2]string]uint64{}
	var out []storedEntry
	off := int64(8)
	for range n {
		e := storedEntry{topic: []string{"orders", "eu.clicks"}[rng.IntN(2)], producer: []string{"p", "q", "r"}[rng.IntN(3)]}
		k := [2]string{e.topic, e.producer}
		var batch []broker.Record
		for range 1 + rng.IntN(4) {
			next[k] += 1 + uint64(rng.IntN(2)) // gaps sometimes
			payload := make([]byte, rng.IntN(120))
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			r := storedRec{seq: next[k], payload: string(payload)}
			rec := broker.Record{Seq: r.seq, Payload: payload}
			if rng.IntN(3) == 0 {
				r.key, r.headerKey, r.value = fmt.Sprint("k", rng.IntN(100)), "h", fmt.Sprint(rng.Uint64())
				r.eventTimeUnixNs = rng.Int64N(1 << 60)
				rec.Key, rec.EventTime = []byte(r.key), time.Unix(0, r.eventTimeUnixNs)
				rec.Headers = []wire.Header{{Key: r.headerKey, Value: []byte(r.value)}}
			}
			e.recs = append(e.recs, r)
			batch = append(batch, rec)
		}
		require.NoError(t, s.Append(e.topic, e.producer, 0, batch))
		st, err := os.Stat(path)
		require.NoError(t, err)
		e.start, e.end = off, st.Size()
		off = e.end
		out = append(out, e)
	}
	return out
}

// scanStored returns every record of the store at path, opened with opts,
// as storedEntry values of one record each, in file order.
func scanStored(t *testing.T, s *file.Store) []storedRec {
	t.Helper()
	var got []storedRec
	require.NoError(t, s.Scan(func(topic, producer string, r broker.Record) error {
		sr := storedRec{seq: r.Seq, payload: topic + "/" + producer + ":" + string(r.Payload), key: string(r.Key)}
		if len(r.Headers) > 0 {
			sr.headerKey, sr.value = r.Headers[0].Key, string(r.Headers[0].Value)
		}
		if !r.EventTime.IsZero() {
			sr.eventTimeUnixNs = r.EventTime.UnixNano()
		}
		got = append(got, sr)
		return nil
	}))
	return got
}

// TestBitFlipNeverTruncatesSilently is a property test over single
// bit flips at many offsets of a store file of random entries: the damaged
// file never opens without Repair (nothing is cut silently) unless the
// flip is in the last entry, with no intact entry after it, which is a
// torn tail by the rule (see recover.go) and cut; with Repair it opens,
// every record of every entry that ends before the flip is there,
// unchanged, and the store file followed by the side file is the damaged
// file byte for byte (nothing deleted).
func TestBitFlipNeverTruncatesSilently(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2026))
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	entries := writeDamageFixture(t, ref, 80, rng)
	full, err := os.ReadFile(ref)
	require.NoError(t, err)
	last := entries[len(entries)-1]

	// Every byte of the header, of the first two entries and of the last
	// one, and 300 random offsets: each with a random bit flipped.
	var offsets []int64
	for i := int64(0); i < entries[1].end; i++ {
		offsets = append(offsets, i)
	}
	for i := last.start; i < last.end; i++ {
		offsets = append(offsets, i)
	}
	for range 300 {
		offsets = append(offsets, rng.Int64N(int64(len(full))))
	}

	for _, at := range offsets {
		damaged := bytes.Clone(full)
		damaged[at] ^= 1 << rng.IntN(8)
		path := filepath.Join(dir, fmt.Sprintf("flip-%d", at))
		require.NoError(t, os.WriteFile(path, damaged, 0o600))

		s, err := file.Open(path)
		if err == nil {
			rec := s.Recovery()
			require.NoError(t, s.Close())
			require.GreaterOrEqual(t, at, last.start, "flip at %d: opened without repair", at)
			require.Equal(t, last.end-last.start, rec.TruncatedBytes, "flip at %d: the last entry is a torn tail", at)
			require.NoError(t, os.Remove(path))
			continue
		}
		require.ErrorIs(t, err, file.ErrCorrupt, "flip at %d", at)
		require.Nil(t, s)
		now, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, damaged, now, "flip at %d: a refused file must stay untouched", at)
		if at < 8 {
			continue // the file header: not a store file any more, nothing to repair
		}

		s, err = file.Open(path, file.Repair(), file.Fsync(file.FsyncNone))
		require.NoError(t, err, "flip at %d: repair", at)
		rec := s.Recovery()
		got := scanStored(t, s)
		require.NoError(t, s.Close())

		var want []storedRec
		for _, e := range entries {
			if e.end > at {
				break
			}
			for _, r := range e.recs {
				r.payload = e.topic + "/" + e.producer + ":" + r.payload
				want = append(want, r)
			}
		}
		require.GreaterOrEqual(t, len(got), len(want), "flip at %d: records before it lost", at)
		require.Equal(t, want, got[:len(want)], "flip at %d: records before it changed", at)

		kept, err := os.ReadFile(path)
		require.NoError(t, err)
		side, err := os.ReadFile(rec.SideFile)
		require.NoError(t, err, "flip at %d", at)
		require.Equal(t, damaged, append(kept, side...), "flip at %d: store + side file = the damaged file", at)
		require.NoError(t, os.Remove(rec.SideFile))
		require.NoError(t, os.Remove(path))
	}
}
