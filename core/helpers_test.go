package core_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on an event; hitting it fails the test.
const waitTimeout = 10 * time.Second

// env is a producer wired to an in-memory broker.
type env struct {
	t      *testing.T
	store  *broker.MemoryStore
	broker *broker.Broker
	dialer *mem.Dialer
	p      *core.Producer
	errs   *testkit.ErrLog
}

func newEnv(t *testing.T, opts ...core.Option) *env {
	t.Helper()
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	e := &env{t: t, store: store, broker: b, dialer: d, errs: &testkit.ErrLog{}}
	opts = append([]core.Option{
		core.Name("test-producer"),
		core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond),
		core.ErrorHandler(e.errs.Add),
	}, opts...)
	e.p, err = core.New(d, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Tests that care how Close drains call it themselves; here,
		// whatever is still pending is failed quickly.
		testkit.CloseProducer(t, e.p, 100*time.Millisecond)
		_ = d.Close()
	})
	return e
}

// outcome is what one message's callback received, and when.
type outcome struct {
	id  core.MessageID
	err error
	at  time.Time
	n   int // how many times the callback ran
}

// recorder collects callback outcomes per message index.
type recorder struct {
	mu    sync.Mutex
	out   map[int]*outcome
	order []int // indices of successes, in callback order
	done  chan struct{}
	want  int
	got   int
}

func newRecorder(want int) *recorder {
	return &recorder{out: make(map[int]*outcome), done: make(chan struct{}), want: want}
}

func (r *recorder) cb(i int) core.Callback {
	return func(id core.MessageID, _ *core.Message, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		o := r.out[i]
		if o == nil {
			o = &outcome{}
			r.out[i] = o
		}
		o.n++
		if o.n > 1 {
			return // counted; the checks report it
		}
		o.id, o.err, o.at = id, err, time.Now()
		if err == nil {
			r.order = append(r.order, i)
		}
		r.got++
		if r.got == r.want {
			close(r.done)
		}
	}
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(waitTimeout):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("only %d of %d callbacks ran", r.got, r.want)
	}
}

func (r *recorder) get(i int) outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.out[i]; o != nil {
		return *o
	}
	return outcome{}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func payload(i int) []byte { return []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)} }
