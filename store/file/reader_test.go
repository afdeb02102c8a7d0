package file_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/store/file"
)

// readN reads n records from r, each within waitTimeout, payloads copied,
// and returns them with the position after the last one.
func readN(t *testing.T, r *file.Reader, n int) ([]fileRec, file.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out []fileRec
	var pos file.Position
	for range n {
		rec, err := r.Next(ctx)
		require.NoError(t, err, "after %d of %d records", len(out), n)
		out = append(out, fileRec{rec.Producer, rec.Seq, string(rec.Payload)})
		pos = rec.Resume
		assert.Equal(t, pos, r.Position())
	}
	return out, pos
}

// caughtUp checks that r has nothing more to read: Next waits until its
// context ends.
func caughtUp(t *testing.T, r *file.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rec, err := r.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a record more: %+v", rec)
}

func openReader(t *testing.T, path string, from file.Position) *file.Reader {
	t.Helper()
	r, err := file.OpenReader(path, from, file.PollInterval(5*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestFileReaderResumes: a Reader reads a store of many segments from the
// beginning; a new Reader at a record's Resume position (in the middle of
// an entry, and at an entry's end) goes on with the record after it, across
// rolls and a restart of the writer, each record once; at the end Next
// waits, and returns a record appended meanwhile. A position whose segment
// retention removed starts the reader at the oldest segment left, saying
// so once (ErrSegmentsRemoved). Bad input gets clear errors.
func TestFileReaderResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	opts := []file.Option{file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone)}
	s := openFileStore(t, path, opts...)
	calls := segmentCalls(90, 3) // entries of 1 to 3 records
	fileAppendAll(t, s, calls[:60])
	want, _ := fileWant(calls)
	head, _ := fileWant(calls[:60])
	first := len(head)
	require.Greater(t, len(s.Segments()), 3, "several segments")

	r := openReader(t, path, file.Position{})
	got, _ := readN(t, r, first)
	assert.Equal(t, want[:first], got)
	caughtUp(t, r)

	// Positions taken mid-entry and at an entry's end, and every other one:
	// a reader opened at any of them goes on with the next record.
	r = openReader(t, path, file.Position{})
	var positions []file.Position
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for range first {
		rec, err := r.Next(ctx)
		require.NoError(t, err)
		positions = append(positions, rec.Resume)
	}
	mid, end := -1, -1
	for i, p := range positions[:first-1] {
		if p.Record > 0 && mid < 0 {
			mid = i
		}
		if p.Record == 0 && i > 10 && end < 0 {
			end = i
		}
	}
	require.True(t, mid >= 0 && end >= 0, "positions in and after an entry")
	for _, i := range []int{mid, end, 0, first / 2} {
		r := openReader(t, path, positions[i])
		got, _ := readN(t, r, first-i-1)
		assert.Equal(t, want[i+1:first], got, "from the position after record %d (%v)", i, positions[i])
		caughtUp(t, r)
	}

	// The writer restarts and writes on, rolling: a reader at the last
	// position reads the rest; one left waiting gets what comes.
	pos := positions[first-1]
	require.NoError(t, s.Close())
	s = openFileStore(t, path, opts...)
	defer s.Close()
	waiting := openReader(t, path, pos)
	caughtUp(t, waiting)
	fileAppendAll(t, s, calls[60:])
	got, _ = readN(t, openReader(t, path, pos), len(want)-first)
	assert.Equal(t, want[first:], got)
	got, _ = readN(t, waiting, len(want)-first)
	assert.Equal(t, want[first:], got, "the waiting reader follows")
	caughtUp(t, waiting)
	followed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		rec, err := waiting.Next(ctx)
		if err == nil && string(rec.Payload) != "late" {
			err = errors.New("not the late record: " + string(rec.Payload))
		}
		followed <- err
	}()
	require.NoError(t, s.Append(dflt, "late", 0, seqRecs(1, recs("late"))))
	require.NoError(t, <-followed)

	// Retention removes the oldest segments: a position in one of them
	// starts the reader at the oldest left, which it says once.
	require.NoError(t, s.Close())
	s = openFileStore(t, path, append(opts, file.RetainBytes(2*testSegment))...)
	segs := s.Segments()
	r = openReader(t, path, positions[0])
	_, err := r.Next(ctx)
	require.ErrorIs(t, err, file.ErrSegmentsRemoved)
	// Up to the late record, the last one written, then nothing more: a
	// short deadline on every Next would end the read early if one
	// Next (which checks its context between entries) were slow.
	late := fileRec{"late", 1, "late"}
	var rest []fileRec
	for len(rest) == 0 || rest[len(rest)-1] != late {
		rec, err := r.Next(ctx)
		require.NoError(t, err, "after %d records", len(rest))
		rest = append(rest, fileRec{rec.Producer, rec.Seq, string(rec.Payload)})
	}
	caughtUp(t, r)
	all := append(want, late)
	require.NotEmpty(t, rest)
	assert.Less(t, len(rest), len(all), "the oldest records are gone")
	assert.Equal(t, all[len(all)-len(rest):], rest, "the records of the segments left: %d segments", len(segs))

	// Clear errors.
	_, err = file.OpenReader(filepath.Join(t.TempDir(), "none"), file.Position{})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = file.OpenReader(path, file.Position{}, file.PollInterval(0))
	assert.ErrorIs(t, err, file.ErrInvalidOption)
	_, err = file.OpenReader(path, file.Position{Offset: 3, Check: 1})
	assert.ErrorContains(t, err, "not a position of a store")
	closed := openReader(t, path, file.Position{})
	require.NoError(t, closed.Close())
	require.NoError(t, closed.Close(), "idempotent")
	_, err = closed.Next(ctx)
	assert.ErrorIs(t, err, file.ErrReaderClosed)
}

// TestFileReaderFollowsRolls: a Reader follows a store while another
// goroutine writes it, rolling every few entries (and, in the second
// case, retention removing the oldest segments): it returns the records
// in the order they were appended, each once; with retention, it may miss
// the oldest, saying so (ErrSegmentsRemoved), never records after what it
// returned last, and it ends with the last record written.
func TestFileReaderFollowsRolls(t *testing.T) {
	for _, retain := range []bool{false, true} {
		t.Run(map[bool]string{false: "rolls", true: "retention"}[retain], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			opts := []file.Option{file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone)}
			if retain {
				opts = append(opts, file.RetainBytes(4*testSegment))
			}
			s := openFileStore(t, path, opts...)
			defer s.Close()
			calls := segmentCalls(400, 4)
			want, _ := fileWant(calls)
			r := openReader(t, path, file.Position{})
			wrote := make(chan struct{})
			go func() { // the writer, owned by the test: it ends before the test reads its last record
				defer close(wrote)
				for _, c := range calls {
					if err := s.Append(dflt, c.producer, 0, seqRecs(c.first, c.records())); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			var got []fileRec
			gaps := 0
			for len(got) == 0 || got[len(got)-1] != want[len(want)-1] {
				rec, err := r.Next(ctx)
				if retain && errors.Is(err, file.ErrSegmentsRemoved) {
					gaps++
					continue
				}
				require.NoError(t, err, "after %d records", len(got))
				got = append(got, fileRec{rec.Producer, rec.Seq, string(rec.Payload)})
			}
			<-wrote
			caughtUp(t, r)
			if !retain {
				assert.Equal(t, want, got)
				return
			}
			// In order, each once: got is a run of want's records per gap.
			i := 0
			for _, g := range got {
				for i < len(want) && want[i] != g {
					i++
				}
				require.Less(t, i, len(want), "%v: not in order, or twice", g)
				i++
			}
			t.Logf("%d of %d records read, %d gaps reported", len(got), len(want), gaps)
			if len(got) < len(want) {
				assert.Positive(t, gaps, "records missed without ErrSegmentsRemoved")
			}
		})
	}
}
