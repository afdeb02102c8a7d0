package file

// Reading a Store back: Scan, and Verify, which is a Scan that only
// checks.

import (
	"errors"
	"fmt"
	"github.com/inflightmq/inflight/broker"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/inflightmq/inflight/wire"
)

// Scan calls fn for every record in the store, from the oldest sealed
// segment to the end of the active one, in the order they were appended
// (per producer that is sequence order), stopping at fn's first error and
// returning it. It sees the entries written before it started, and holds no
// lock while fn runs: fn may call any method. A sealed segment that
// retention removes before Scan reaches it is skipped. The record's slices
// and headers are valid only during fn. Records of a version 1 store (see
// Recovery.UpgradedFrom) have the topic wire.DefaultTopic and no metadata.
//
// Scan returns broker.ErrStoreClosed after Close, and if Close happens during the
// scan. An entry that does not check out (its CRC, its length, its body)
// stops it with a *CorruptError (wrapping ErrCorrupt) that names the segment
// and the offset, after fn saw every record before it (ScanSkipDamaged goes
// on with the next segment). Safe for concurrent use.
func (f *Store) Scan(fn func(topic, producer string, rec broker.Record) error) error {
	return f.ScanSkipDamaged(fn, func(e *CorruptError) error { return e })
}

// ScanSkipDamaged is Scan that goes on past damage: at an entry that does
// not check out, once fn saw every record before it, it calls skipped with
// the *CorruptError, and goes on at the next intact entry of that segment
// (the first whose length and CRC check out: CorruptError.Next) or, if
// none, with the next segment; if skipped
// returns an error, the scan stops with it. An entry holds at most one
// producer frame, so a flipped bit costs that frame's records. It returns nil if skipped always returned nil and fn
// never failed. Nothing is changed in the files. Safe for concurrent use.
func (f *Store) ScanSkipDamaged(fn func(topic, producer string, rec broker.Record) error, skipped func(*CorruptError) error) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return broker.ErrStoreClosed
	}
	sealed := slices.Clone(f.sealed)
	active, activeEnd := io.ReaderAt(f.file), f.written-f.base
	var own *os.File
	if !f.readOnly {
		// A roll may replace f.file while fn runs: read through a file of
		// our own, opened under f.mu, so it is the active segment.
		var err error
		if own, err = os.Open(f.path); err != nil {
			f.mu.Unlock()
			return fmt.Errorf("inflight/file: store scan: %w", err)
		}
		defer own.Close()
		active = own
	}
	f.mu.Unlock()

	var rr wire.RecordReader
	for _, s := range sealed {
		file, err := os.Open(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // retention removed it
		}
		if err != nil {
			return fmt.Errorf("inflight/file: store scan: %w", err)
		}
		err = f.scanSegment(file, s.size, s.path, true, &rr, fn, skipped)
		_ = file.Close()
		if err != nil {
			return err
		}
	}
	return f.scanSegment(active, activeEnd, f.path, false, &rr, fn, skipped)
}

// scanSegment calls fn for the records of one segment, up to end. At a bad
// entry it calls skipped with a *CorruptError, and if that returns nil,
// goes on at the next intact entry (see ScanSkipDamaged), if any.
func (f *Store) scanSegment(file io.ReaderAt, end int64, path string, sealed bool, rr *wire.RecordReader,
	fn func(topic, producer string, rec broker.Record) error, skipped func(*CorruptError) error) error {
	if end <= fileHeaderSize {
		return nil // a new store: nothing written yet
	}
	v, err := segmentVersion(file, end)
	if errors.Is(err, os.ErrClosed) {
		return broker.ErrStoreClosed
	}
	if err != nil {
		return fmt.Errorf("inflight/file: store scan: %s: %w", path, err)
	}
	topic, name := "", ""
	for from := int64(0); ; {
		_, bad, err := segmentEntries(file, from, end, v, rr,
			func(body []byte, _ int64) error {
				_, err := parseSnapshot(body, newState())
				return err
			},
			func(e *entry) error {
				if f.shut.Load() {
					return broker.ErrStoreClosed
				}
				if string(e.topic) != topic {
					topic = string(e.topic)
				}
				if string(e.name) != name {
					name = string(e.name)
				}
				for range e.count {
					rr.Reset()
					if err := fn(topic, name, e.nextRecord(rr)); err != nil {
						return err
					}
				}
				return nil
			})
		if bad != nil {
			// Each entry holds at most one producer frame (see planEntries):
			// past the damage, the next entry whose length and CRC check out
			// is where the reading can go on.
			next, err := findEntry(file, bad.off+1, end)
			if err != nil {
				return fmt.Errorf("inflight/file: store scan: %s: %w", path, err)
			}
			ce := &CorruptError{Path: path, Offset: bad.off, Bytes: end - bad.off, Why: bad.why, Sealed: sealed, Next: max(next, 0)}
			if err := skipped(ce); err != nil || next < 0 {
				return err
			}
			from = next
			continue
		}
		var readErr *segmentReadError
		if errors.As(err, &readErr) {
			if errors.Is(readErr.err, os.ErrClosed) {
				return broker.ErrStoreClosed
			}
			return fmt.Errorf("inflight/file: store scan: %s %w", path, err)
		}
		return err // nil, broker.ErrStoreClosed, or fn's error as fn returned it
	}
}

// Verify reads every entry of every segment and checks it (its CRC, its
// length, its body), as Scan does: the sealed segments are not read when the
// store opens, so damage there (a flipped bit on disk) shows only when they
// are read. It returns nil, or a *CorruptError naming the first damaged
// segment and offset (never cut: copy out what Scan reads before it), or
// broker.ErrStoreClosed. It costs a read of the whole store. Safe for concurrent
// use.
func (f *Store) Verify() error {
	return f.Scan(func(string, string, broker.Record) error { return nil })
}
