package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestManualTimersFireInOrderWhenAdvanced(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewManual(start)
	t1 := m.NewTimer(2 * time.Second)
	t2 := m.NewTimer(1 * time.Second)
	require.Equal(t, 2, m.Timers())

	m.Advance(999 * time.Millisecond)
	assertNotFired(t, t1)
	assertNotFired(t, t2)

	m.Advance(time.Millisecond)
	assert.Equal(t, start.Add(time.Second), <-t2.C())
	assertNotFired(t, t1)

	m.Advance(5 * time.Second)
	assert.Equal(t, start.Add(6*time.Second), <-t1.C())
	assert.Equal(t, 0, m.Timers())
}

func TestManualStopAndReset(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	tm := m.NewTimer(time.Second)
	assert.True(t, tm.Stop())
	assert.False(t, tm.Stop())
	m.Advance(2 * time.Second)
	assertNotFired(t, tm)

	assert.False(t, tm.Reset(time.Second))
	assert.True(t, tm.Reset(3*time.Second), "Reset of an armed timer reports it was active")
	m.Advance(2 * time.Second)
	assertNotFired(t, tm)
	m.Advance(time.Second)
	<-tm.C()

	tm.Reset(0)
	<-tm.C()
}

func TestManualSetNeverGoesBack(t *testing.T) {
	m := NewManual(time.Unix(10, 0))
	m.Set(time.Unix(5, 0))
	assert.Equal(t, time.Unix(10, 0), m.Now())
}

func TestManualWaitTimers(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	done := make(chan struct{})
	got := make(chan bool)
	go func() { got <- m.WaitTimers(1, done) }()
	m.NewTimer(time.Second)
	assert.True(t, <-got)

	close(done)
	assert.False(t, m.WaitTimers(5, done))
}

func TestSystemClock(t *testing.T) {
	c := System()
	assert.True(t, IsSystem(c))
	assert.False(t, IsSystem(NewManual(time.Now())))
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	assert.False(t, tm.Stop())
	assert.False(t, tm.Reset(time.Hour))
	assert.True(t, tm.Stop())
	assert.False(t, c.Now().IsZero())
}

func assertNotFired(t *testing.T, tm Timer) {
	t.Helper()
	select {
	case v := <-tm.C():
		t.Fatalf("timer fired early at %v", v)
	default:
	}
}
