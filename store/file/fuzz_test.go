package file_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/wire"
)

// FuzzReplay feeds arbitrary bytes after a valid segment header
// (version 1, 2 or 4, which Open upgrades to 6; 3 or 5, a segment a roll
// created, whose first entry is a snapshot, which Open upgrades to 7; 4 to
// 7 may hold fence entries, 6 and 7 name fence entries; version is taken
// modulo 7) to Open's
// replay: it must not panic; it either opens, cutting at
// most a torn tail, or refuses the file as corrupt and leaves it untouched,
// and then opens with Repair, the side file holding every byte it took off;
// it must read back only records whose metadata is within the limits, and
// leave a file that fences, appends and reopens cleanly.
func FuzzReplay(f *testing.F) {
	// A real file's bytes as the main seed.
	dir := f.TempDir()
	seedPath := filepath.Join(dir, "seed")
	st, err := file.Open(seedPath, file.Fsync(file.FsyncNone))
	if err != nil {
		f.Fatal(err)
	}
	_ = st.Append(dflt, "p", 0, seqRecs(1, [][]byte{[]byte("a"), {}, []byte("ccc")}))
	_ = st.Append(dflt, "q", 0, seqRecs(7, [][]byte{[]byte("x")}))
	_ = st.Append("eu.orders", "p", 0, []broker.Record{
		{Seq: 1, Payload: []byte("m"), Key: []byte("k"), Headers: []wire.Header{{Key: "h", Value: []byte("v")}, {Key: "h"}}, EventTime: time.Unix(1700000000, 1)},
		{Seq: 5, Payload: []byte("gap before")},
	})
	_ = st.Close()
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		f.Fatal(err)
	}
	body := seed[8:]
	fenced, oldFenced := fencedSegment(f, false), fencedSegment(f, true)
	rolled := rolledSegment(f)
	const v1, v2, v3, v4, v5, v6, v7 = 1, 2, 0, 3, 4, 5, 6
	f.Add(uint8(v2), body)
	f.Add(uint8(v2), body[:len(body)-3])
	f.Add(uint8(v2), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(v2), []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Add(uint8(v1), v1Entries())
	f.Add(uint8(v2), v1Entries()) // version 1 entries stay readable in an upgraded file
	f.Add(uint8(v4), v1Entries()) // and in a file upgraded again
	f.Add(uint8(v1), body)        // version 2 entries under a version 1 header: still only well-formed ones
	f.Add(uint8(v3), rolled)
	f.Add(uint8(v3), rolled[:len(rolled)-5])
	f.Add(uint8(v3), body)        // no snapshot
	f.Add(uint8(v3), v1Entries()) // version 1 bodies do not occur in version 3
	f.Add(uint8(v4), oldFenced)
	f.Add(uint8(v4), append(v1Entries(), oldFenced...))
	f.Add(uint8(v4), oldFenced[:len(oldFenced)-2])
	f.Add(uint8(v2), oldFenced) // no fence entries before version 4
	f.Add(uint8(v4), fenced)    // no name fence entries before version 6
	f.Add(uint8(v6), fenced)
	f.Add(uint8(v6), oldFenced) // old fence entries stay readable in an upgraded file
	f.Add(uint8(v6), fenced[:len(fenced)-2])
	f.Add(uint8(v5), rolled)
	f.Add(uint8(v5), rolledSegment5(f, true))
	f.Add(uint8(v7), rolledSegment5(f, true))
	f.Add(uint8(v7), rolledSegment5(f, false))
	f.Fuzz(func(t *testing.T, version uint8, data []byte) {
		path := filepath.Join(t.TempDir(), "store")
		header := []byte("IFLT\x00\x00\x00\x02")
		header[7] = []byte{3, 1, 2, 4, 5, 6, 7}[version%7]
		if err := os.WriteFile(path, append(header, data...), 0o600); err != nil {
			t.Fatal(err)
		}
		original := append(header, data...)
		st, err := file.Open(path, file.Fsync(file.FsyncNone))
		var ce *file.CorruptError
		if errors.As(err, &ce) {
			if now, _ := os.ReadFile(path); !bytes.Equal(now, original) {
				t.Fatalf("a refused file was changed")
			}
			if ce.Offset < 8 || ce.Offset+ce.Bytes != int64(len(original)) {
				t.Fatalf("corrupt at %d, %d bytes follow, in a file of %d", ce.Offset, ce.Bytes, len(original))
			}
			st, err = file.Open(path, file.Fsync(file.FsyncNone), file.Repair())
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			rec := st.Recovery()
			side, _ := os.ReadFile(rec.SideFile)
			if rec.RepairedBytes != ce.Bytes || !bytes.Equal(side, original[ce.Offset:]) {
				t.Fatalf("repair moved %d bytes to %q (%d there), want the %d from %d", rec.RepairedBytes, rec.SideFile, len(side), ce.Bytes, ce.Offset)
			}
		} else if err != nil {
			t.Fatalf("a file with a valid header must open or be corrupt: %v", err)
		}
		rec := st.Recovery()
		if rec.TruncatedBytes < 0 || rec.TruncatedBytes > int64(len(data)) {
			t.Fatalf("truncated %d of %d bytes", rec.TruncatedBytes, len(data))
		}
		records := 0
		if err := st.Scan(func(_, _ string, r broker.Record) error {
			if _, err := wire.CheckMeta(r.Key, r.Headers, r.EventTime); err != nil || r.Seq == 0 {
				t.Fatalf("scan read seq %d with bad metadata: %v", r.Seq, err)
			}
			records++
			return nil
		}); err != nil {
			t.Fatalf("scan after recovery: %v", err)
		}
		if records != rec.Records {
			t.Fatalf("scan saw %d records, recovery %d", records, rec.Records)
		}
		state, _ := st.State(dflt, "fuzz")
		if err := st.Fence("fuzz", state.Epoch+1); err != nil {
			t.Fatalf("fence after recovery: %v", err)
		}
		if err := st.Append(dflt, "fuzz", state.Epoch+1, seqRecs(state.LastSeq+1, [][]byte{[]byte("after")})); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st, err = file.Open(path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if got := st.Recovery(); got.TruncatedBytes != 0 || got.Records != rec.Records+1 || got.UpgradedFrom != 0 {
			t.Fatalf("reopen after append: %+v (before: %+v)", got, rec)
		}
		if got, _ := st.State(dflt, "fuzz"); got != (broker.NameState{LastSeq: state.LastSeq + 1, Epoch: state.Epoch + 1}) {
			t.Fatalf("reopen after fence and append: %+v (before: %+v)", got, state)
		}
		_ = st.Close()
	})
}

// rolledSegment returns the bytes after the header of the active segment
// of a store that rolled: a snapshot of three producers, then entries.
func rolledSegment(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "rolled")
	st, err := file.Open(path, file.Fsync(file.FsyncNone), file.SegmentBytes(4<<10))
	if err != nil {
		f.Fatal(err)
	}
	big := bytes.Repeat([]byte("r"), 3000)
	_ = st.Append(dflt, "p", 0, seqRecs(1, [][]byte{big}))
	_ = st.Append("eu.orders", "q", 0, seqRecs(4, [][]byte{big}))
	_ = st.Append(dflt, "s", 0, seqRecs(9, [][]byte{big}))
	_ = st.Append(dflt, "p", 0, seqRecs(2, [][]byte{[]byte("after the roll")}))
	_ = st.Close()
	b, err := os.ReadFile(path)
	if err != nil || string(b[:8]) != "IFLT\x00\x00\x00\x07" {
		f.Fatalf("no rolled segment: %q, %v", b[:min(8, len(b))], err)
	}
	// The snapshot as a roll before epochs wrote it (kind 1, no epochs):
	// the bytes of a version 3 segment.
	return oldSnapshot(f, b[8:], 1)
}

// rolledSegment5 returns the bytes after the header of a rolled segment
// whose snapshot has epochs (one a fence set without records), followed by
// a fence entry and a record entry; with old, as version 5 wrote it
// (epochs and fences per (topic, producer)), else as version 7 does.
func rolledSegment5(f *testing.F, old bool) []byte {
	path := filepath.Join(f.TempDir(), "rolled5")
	st, err := file.Open(path, file.Fsync(file.FsyncNone), file.SegmentBytes(4<<10))
	if err != nil {
		f.Fatal(err)
	}
	big := bytes.Repeat([]byte("r"), 3000)
	_ = st.Fence("f", 3)
	_ = st.Append(dflt, "p", 0, seqRecs(1, [][]byte{big}))
	_ = st.Append(dflt, "s", 0, seqRecs(9, [][]byte{big}))
	_ = st.Fence("p", 2)
	_ = st.Append(dflt, "p", 2, seqRecs(2, [][]byte{[]byte("after the roll")}))
	_ = st.Close()
	b, err := os.ReadFile(path)
	if err != nil || string(b[:8]) != "IFLT\x00\x00\x00\x07" {
		f.Fatalf("no rolled segment: %q, %v", b[:min(8, len(b))], err)
	}
	if old {
		return oldFences(f, oldSnapshot(f, b[8:], 2), dflt)
	}
	return b[8:]
}

// fencedSegment returns the bytes after the header of a store that never
// rolled, holding fence entries between record entries; with old, as
// version 4 wrote them (per (topic, producer)), else as version 6 does.
func fencedSegment(f *testing.F, old bool) []byte {
	path := filepath.Join(f.TempDir(), "fenced")
	st, err := file.Open(path, file.Fsync(file.FsyncNone))
	if err != nil {
		f.Fatal(err)
	}
	_ = st.Fence("p", 1)
	_ = st.Append(dflt, "p", 1, seqRecs(1, [][]byte{[]byte("a")}))
	_ = st.Fence("q", 7)
	_ = st.Fence("p", 2)
	_ = st.Append(dflt, "p", 2, seqRecs(2, [][]byte{[]byte("b")}))
	_ = st.Close()
	b, err := os.ReadFile(path)
	if err != nil || string(b[:8]) != "IFLT\x00\x00\x00\x06" {
		f.Fatalf("no fenced segment: %q, %v", b[:min(8, len(b))], err)
	}
	if old {
		return oldFences(f, b[8:], "eu.orders")
	}
	return b[8:]
}

// v1Entries returns entries as a version 1 Store wrote them, built by
// hand: producer "old", seqs 1-2 ("a", ""), then producer "p", seq 9 ("z").
func v1Entries() []byte {
	entry := func(name string, first uint64, recs ...string) []byte {
		body := append([]byte{byte(len(name))}, name...)
		body = binary.BigEndian.AppendUint64(body, first)
		body = binary.BigEndian.AppendUint32(body, uint32(len(recs)))
		for _, r := range recs {
			body = binary.AppendUvarint(body, uint64(len(r)))
			body = append(body, r...)
		}
		e := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		e = binary.BigEndian.AppendUint32(e, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		return append(e, body...)
	}
	return append(entry("old", 1, "a", ""), entry("p", 9, "z")...)
}
