package broker_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/inflightmq/inflight/broker"
)

// BenchmarkFileStoreReopen measures a restart: OpenFileStore replaying a
// file of 1 M or 10 M records (100 producers, batches of 1000 records of
// 16 bytes, as a busy broker writes them). The file is built once per size,
// outside the timing; every op opens and closes it.
//
//	go test -run=NONE -bench=FileStoreReopen -benchtime=3x ./broker/
func BenchmarkFileStoreReopen(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("records=%dM", n/1_000_000), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "store")
			s := openFileStore(b, path, broker.Fsync(broker.FsyncNone))
			const batch = 1000
			payloads := make([][]byte, batch)
			for i := range payloads {
				payloads[i] = binary.BigEndian.AppendUint64(make([]byte, 8, 16), uint64(i))
			}
			for i := 0; i < n/batch; i++ {
				producer := fmt.Sprint("p", i%100)
				if err := s.Append(dflt, producer, seqRecs(uint64(i/100*batch+1), payloads)); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(st.Size())
			b.ResetTimer()
			for b.Loop() {
				s, err := broker.OpenFileStore(path)
				if err != nil {
					b.Fatal(err)
				}
				if got := s.Recovery().Records; got != n {
					b.Fatalf("replayed %d records, want %d", got, n)
				}
				b.StopTimer()
				_ = s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
		})
	}
}
