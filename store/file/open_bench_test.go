package file_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/inflightmq/inflight/store/file"
)

// BenchmarkReopen measures a restart: Open on a store of
// 1 M or 10 M records (100 producers, batches of 1000 records of 16 bytes,
// as a busy broker writes them), in segments of the default size (a
// restart replays the active one) and in one segment as large as the log
// (as a store before segments: the whole log is replayed). The store is
// built once per case, outside the timing; every op opens and closes it,
// and checks every producer's last sequence ID.
//
//	go test -run=NONE -bench=Reopen -benchtime=3x ./store/file/
func BenchmarkReopen(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		for _, seg := range []struct {
			name  string
			bytes int64
		}{{"segments=128MiB", 128 << 20}, {"segments=one", 1 << 40}} {
			b.Run(fmt.Sprintf("records=%dM/%s", n/1_000_000, seg.name), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "store")
				s := openFileStore(b, path, file.Fsync(file.FsyncNone), file.SegmentBytes(seg.bytes))
				const batch, producers = 1000, 100
				payloads := make([][]byte, batch)
				for i := range payloads {
					payloads[i] = binary.BigEndian.AppendUint64(make([]byte, 8, 16), uint64(i))
				}
				for i := 0; i < n/batch; i++ {
					producer := fmt.Sprint("p", i%producers)
					if err := s.Append(dflt, producer, 0, seqRecs(uint64(i/producers*batch+1), payloads)); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				wantLast := uint64(n / producers)
				b.ResetTimer()
				replayed := 0
				for b.Loop() {
					s, err := file.Open(path, file.SegmentBytes(seg.bytes))
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					replayed = s.Recovery().Records
					for p := range producers {
						if last, _ := lastSeq(s, dflt, fmt.Sprint("p", p)); last != wantLast {
							b.Fatalf("p%d: last seq %d, want %d", p, last, wantLast)
						}
					}
					_ = s.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
				b.ReportMetric(float64(replayed), "records-replayed")
			})
		}
	}
}
