package broker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/inflightmq/inflight/broker"
)

// FuzzFileStoreReplay feeds arbitrary bytes after a valid file header to
// OpenFileStore's replay: it must not panic, must cut whatever does not
// check out, and must leave a file that appends and reopens cleanly.
func FuzzFileStoreReplay(f *testing.F) {
	// A real file's bytes as the main seed.
	dir := f.TempDir()
	seedPath := filepath.Join(dir, "seed")
	st, err := broker.OpenFileStore(seedPath, broker.Fsync(broker.FsyncNone))
	if err != nil {
		f.Fatal(err)
	}
	_ = st.Append("p", 1, [][]byte{[]byte("a"), {}, []byte("ccc")})
	_ = st.Append("q", 7, [][]byte{[]byte("x")})
	_ = st.Close()
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		f.Fatal(err)
	}
	header, body := seed[:8], seed[8:]
	f.Add(body)
	f.Add(body[:len(body)-3])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(path, append(append([]byte(nil), header...), data...), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := broker.OpenFileStore(path, broker.Fsync(broker.FsyncNone))
		if err != nil {
			t.Fatalf("a file with a valid header must open (cutting its tail): %v", err)
		}
		rec := st.Recovery()
		if rec.TruncatedBytes < 0 || rec.TruncatedBytes > int64(len(data)) {
			t.Fatalf("truncated %d of %d bytes", rec.TruncatedBytes, len(data))
		}
		records := 0
		if err := st.Scan(func(string, uint64, []byte) error { records++; return nil }); err != nil {
			t.Fatalf("scan after recovery: %v", err)
		}
		if records != rec.Records {
			t.Fatalf("scan saw %d records, recovery %d", records, rec.Records)
		}
		last, _ := st.LastSeq("fuzz")
		if err := st.Append("fuzz", last+1, [][]byte{[]byte("after")}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st, err = broker.OpenFileStore(path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if got := st.Recovery(); got.TruncatedBytes != 0 || got.Records != rec.Records+1 {
			t.Fatalf("reopen after append: %+v (before: %+v)", got, rec)
		}
		_ = st.Close()
	})
}
