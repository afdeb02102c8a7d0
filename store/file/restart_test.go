package file_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
)

// switchDialer dials whatever broker is current: the producer's view of a
// broker that restarts on the same address.
type switchDialer struct {
	mu sync.Mutex
	d  *mem.Dialer
}

func (s *switchDialer) set(d *mem.Dialer) {
	s.mu.Lock()
	s.d = d
	s.mu.Unlock()
}

func (s *switchDialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	s.mu.Lock()
	d := s.d
	s.mu.Unlock()
	return d.Dial(ctx, h)
}

// TestFencingSurvivesRestart: a producer A of name "p" loses its broker; a
// new instance B of "p" takes the name over on the restarted broker and
// goes away; the broker restarts again, and A comes back with its old
// epoch: the file store remembers B's, so A is fenced at its HELLO. A's
// messages sent while the broker was down fail with ErrFenced; the store
// holds A's first records, then B's, nothing of A after them.
func TestFencingSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	var st *file.Store
	var md *mem.Dialer
	up, down := restartable(t, &st, &md, path)
	opts := []core.Option{core.Name("p"), core.SendTimeout(time.Minute),
		core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond), core.ErrorHandler(func(error) {})}
	send := func(p *core.Producer, what string) (core.MessageID, error) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		return p.Send(ctx, &core.Message{Payload: []byte(what)})
	}

	up()
	sd := &switchDialer{d: md}
	a, err := core.New(sd, opts...)
	require.NoError(t, err)
	defer testkit.CloseProducer(t, a, time.Second)
	for range 3 {
		_, err := send(a, "A")
		require.NoError(t, err)
	}
	down()
	// A's next message waits for a broker.
	aLate := make(chan error, 1)
	go func() { _, err := send(a, "A late"); aLate <- err }()

	up() // a new instance of "p" on the restarted broker
	b, err := core.New(md, opts...)
	require.NoError(t, err)
	for range 3 {
		_, err := send(b, "B")
		require.NoError(t, err)
	}
	testkit.CloseProducer(t, b, time.Second)
	down()

	up() // A's dialer finds this one
	defer down()
	sd.set(md)
	select {
	case err := <-aLate:
		require.ErrorIs(t, err, core.ErrFenced, "A's message sent while the broker was down")
	case <-time.After(waitTimeout):
		t.Fatal("A's late message got no outcome")
	}
	_, err = send(a, "A after")
	require.ErrorIs(t, err, core.ErrFenced)

	var got []string
	require.NoError(t, st.Scan(func(_, _ string, r broker.Record) error {
		got = append(got, string(r.Payload))
		return nil
	}))
	assert.Equal(t, []string{"A", "A", "A", "B", "B", "B"}, got)
	state, err := st.State(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, broker.NameState{LastSeq: 6, Epoch: 2}, state)
}

// restartable returns up, which opens the file store at path with opts, a
// broker on it and an in-memory dialer to that broker (into *st and *md),
// and down, which refuses dials and closes the dialer and the store: a
// broker's restart, without a process.
func restartable(t *testing.T, st **file.Store, md **mem.Dialer, path string, opts ...file.Option) (up, down func()) {
	up = func() {
		var err error
		*st, err = file.Open(path, opts...)
		require.NoError(t, err)
		b, err := broker.New(*st)
		require.NoError(t, err)
		*md = mem.NewDialer(b)
	}
	down = func() {
		(*md).RefuseDials(true)
		require.NoError(t, (*md).Close())
		require.NoError(t, (*st).Close())
	}
	return up, down
}
