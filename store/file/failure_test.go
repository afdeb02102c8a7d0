package file_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// TestStoreFailureReachesProducer: a Store whose disk fills up (or
// whose fsync fails) fails for good; the broker tells producers why with an
// ERROR of code CodeStoreUnavailable, which reaches their ErrorHandler with
// the operating system's reason. Reopened, the store holds what was
// acknowledged.
func TestStoreFailureReachesProducer(t *testing.T) {
	for _, tc := range []struct {
		name              string
		writeErr, syncErr error
		reason            string
		stored            string // after reopening
	}{
		// Half the entry was written: a torn tail, cut.
		{"full disk", syscall.ENOSPC, nil, "no space left on device", "before"},
		// Written whole, not known durable: a message that failed may
		// still have been stored (here the page cache kept it).
		{"fsync fails", nil, syscall.EIO, "input/output error", "before,during"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "store")
			var faults file.FileFaults
			store, err := file.Open(path, file.WithFaults(&faults))
			require.NoError(t, err)
			b, err := broker.New(store)
			require.NoError(t, err)
			d := mem.NewDialer(b)
			defer d.Close()

			remote := make(chan *wire.RemoteError, 64)
			p, err := core.New(d, core.Name("till"), core.SendTimeout(time.Second),
				core.ReconnectBackoff(time.Millisecond, 20*time.Millisecond),
				core.ErrorHandler(func(err error) {
					if re := (*wire.RemoteError)(nil); errors.As(err, &re) {
						select {
						case remote <- re:
						default:
						}
					}
				}))
			require.NoError(t, err)
			defer p.Close(ctx)

			_, err = p.Send(ctx, &core.Message{Payload: []byte("before")})
			require.NoError(t, err)

			faults.Set(tc.writeErr, tc.syncErr)
			_, err = p.Send(ctx, &core.Message{Payload: []byte("during")})
			require.Error(t, err, "not acknowledged")
			select {
			case re := <-remote:
				assert.Equal(t, wire.CodeStoreUnavailable, re.Code)
				assert.Contains(t, re.Text, tc.reason)
			case <-time.After(10 * time.Second):
				t.Fatal("no ERROR reached the ErrorHandler")
			}
			_, err = lastSeq(store, dflt, "till")
			require.ErrorIs(t, err, broker.ErrStoreFailed, "failed for good")
			require.NoError(t, p.Close(ctx))
			_ = store.Close()

			faults.Set(nil, nil)
			again, err := file.Open(path)
			require.NoError(t, err)
			defer again.Close()
			var got []string
			require.NoError(t, again.Scan(func(_, _ string, r broker.Record) error {
				got = append(got, string(r.Payload))
				return nil
			}))
			assert.Equal(t, tc.stored, strings.Join(got, ","))
		})
	}
}
