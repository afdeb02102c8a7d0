package peers

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const franzTopic = "peers"

// franzClient produces with a kgo.Client to an in-process kfake cluster of
// one broker and one topic of one partition. The client is idempotent (its
// default), waits for all in-sync replicas (kgo.AllISRAcks, also its
// default, required by idempotence) and sends uncompressed batches (kgo's
// default would be snappy; inflight runs without compression here). Its
// window is kgo's default: 50000 buffered records (MaxBufferedRecords) and
// no bound on buffered bytes, so 16 KiB records may buffer 800 MB where
// inflight stops at 64 MiB (MaxPendingBytes); bounding kgo to 64 MiB with
// MaxBufferedBytes cost it about 40% of its throughput at 16 KiB here, so
// the default stays. With idempotence kgo keeps up to 5 produce requests in
// flight per broker. linger0 sets ProducerLinger(0) instead of kgo's
// default 10ms.
//
// The cluster runs with kfake.BlackholeProduce: it validates each batch and
// its idempotent sequence numbers and advances the offsets, but does not
// keep the records, like the counting store behind inflight's broker.
type franzClient struct {
	cl      *kgo.Client
	promise func(*kgo.Record, error)
}

func openFranz(linger0 bool) func(testing.TB, *tracker) client {
	return func(tb testing.TB, t *tracker) client {
		cluster, err := kfake.NewCluster(
			kfake.NumBrokers(1),
			kfake.SeedTopics(1, franzTopic),
			kfake.BlackholeProduce(),
		)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(cluster.Close)
		opts := []kgo.Opt{
			kgo.SeedBrokers(cluster.ListenAddrs()...),
			kgo.DefaultProduceTopic(franzTopic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
		}
		if linger0 {
			opts = append(opts, kgo.ProducerLinger(0))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(cl.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err != nil {
			tb.Fatal(err)
		}
		return &franzClient{cl: cl, promise: func(r *kgo.Record, err error) {
			if err != nil {
				t.fail(err)
				return
			}
			t.ack(uint64(r.Offset) + 1)
		}}
	}
}

// send allocates a Record per message: kgo owns it (sets its partition,
// offset, timestamp) until the promise has run.
func (c *franzClient) send(_ int, payload []byte) error {
	c.cl.Produce(context.Background(), &kgo.Record{Value: payload}, c.promise)
	return nil
}

func (c *franzClient) flush(ctx context.Context) error { return c.cl.Flush(ctx) }
