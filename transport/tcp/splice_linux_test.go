package tcp_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

// writeSpliced writes per frames of size bytes (a third of it for every
// other one) in one WriteFrames, each with its middle in a splice of its
// own memory, and returns the splices' memory: the frames the peer must
// get are r.want's, whatever is done to it once the connection holds no
// splice.
func (r *writeRig) writeSpliced(size, per int) [][]byte {
	r.t.Helper()
	bufs := make([]*transport.Buffer, per)
	var held [][]byte
	for j := range bufs {
		f := frame(r.n, size/(1+2*(j%2)))
		r.n++
		r.want.Write(f)
		from, to := len(f)/4, len(f)-len(f)/4
		mid := bytes.Clone(f[from:to])
		held = append(held, mid)
		head := append(bytes.Clone(f[:from]), f[to:]...)
		bufs[j] = &transport.Buffer{Bytes: head, Splices: []wire.Splice{{At: from, Data: mid}}, Owner: r.release}
	}
	require.NoError(r.t, r.conn.(transport.FramesWriter).WriteFrames(bufs))
	return held
}

// fillWriterSpliced writes runs of HandOffBytes with splices (per frames
// each) until the writer has waited for the socket, and returns the
// splices' memory.
func (r *writeRig) fillWriterSpliced(per int) [][]byte {
	r.t.Helper()
	var held [][]byte
	for i := 0; tcp.WriterWaits(r.conn) == 0; i++ {
		require.Less(r.t, i, 64, "the socket never filled")
		held = append(held, r.writeSpliced(tcp.HandOffBytes, per)...)
	}
	return held
}

// requirePrefixRead lets the peer read until the end, and checks that it
// read a prefix of what was written (the connection closed first).
func (r *writeRig) requirePrefixRead() {
	r.t.Helper()
	r.resume()
	waitUntil(r.t, "the peer to see the end", func() bool { _, eof := r.read(); return eof })
	got, _ := r.read()
	require.True(r.t, bytes.HasPrefix(r.want.Bytes(), got), "what the peer read is a prefix of what was written")
}

// detachOverAndOver calls c's Detach over and over on two goroutines
// until the returned stop, which waits for them.
func detachOverAndOver(t *testing.T, c transport.Conn) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				c.(transport.Splicer).Detach()
			}
		})
	}
	return func() {
		close(done)
		testkit.WaitGroup(t, &wg, "the Detaches")
	}
}

// scribble overwrites every byte of the splices' memory, as a producer's
// caller may once its message's callback returned.
func scribble(held [][]byte) {
	for _, b := range held {
		for i := range b {
			b[i] = 0xdd
		}
	}
}

// TestTCPSplicing: the connection takes frames with splices on Linux.
func TestTCPSplicing(t *testing.T) {
	r := newWriteRig(t)
	s, ok := r.conn.(transport.Splicer)
	require.True(t, ok, "a tcp connection is a Splicer")
	assert.True(t, s.Splicing())
	r.resume()
	r.writeSpliced(4<<10, 3)
	r.settled()
}

// TestTCPDetachCopiesWhatTheWriterHolds: frames with splices in runs of
// HandOffBytes go to the writer goroutine, which reads the splices where
// they are; while it waits for a socket the peer does not read, with
// frames queued behind, Detach returns (it does not wait for the network),
// and from then on nothing reads the splices: overwritten, the peer still
// gets every frame as it was, whole and in order, and every buffer is
// released once.
func TestTCPDetachCopiesWhatTheWriterHolds(t *testing.T) {
	for _, per := range []int{1, 3} {
		t.Run("frames per write="+string(rune('0'+per)), func(t *testing.T) {
			r := newWriterRig(t)
			held := r.fillWriterSpliced(per)
			for range 4 { // queued behind the batch the writer holds
				held = append(held, r.writeSpliced(tcp.HandOffBytes, per)...)
			}
			via, _ := tcp.ViaWriter(r.conn)
			require.True(t, via)
			detached := make(chan struct{})
			go func() {
				r.conn.(transport.Splicer).Detach()
				close(detached)
			}()
			testkit.WaitChan(t, detached, "Detach while the writer waits for the socket")
			scribble(held)
			// The writer goes on after the Detach: more frames, spliced
			// too, and a second Detach with nothing to copy.
			r.writeSpliced(tcp.HandOffBytes, per)
			r.resume()
			r.settled()
		})
	}
}

// TestTCPSplicedRestGoesToGnetCopied: frames with splices in runs too
// small for the writer are written from the splices by the caller's
// goroutine; what the socket does not take goes to gnet copied, so that
// nothing reads the splices once WriteFrames returned.
func TestTCPSplicedRestGoesToGnetCopied(t *testing.T) {
	r := newWriteRig(t)
	size := 16 << 10
	for i := 0; !tcp.ViaLoop(r.conn); i++ {
		require.Less(t, i, 8192, "the socket never filled")
		scribble(r.writeSpliced(size, 3))
	}
	for range 8 {
		scribble(r.writeSpliced(size, 3))
	}
	_, runs := tcp.ViaWriter(r.conn)
	assert.Zero(t, runs, "no run went to the writer")
	r.resume()
	r.settled()
}

// TestTCPDetachWithoutAWriter: Detach on a connection that never started
// its writer, and on a closed one, returns at once.
func TestTCPDetachWithoutAWriter(t *testing.T) {
	r := newWriteRig(t)
	detach := func() <-chan struct{} {
		done := make(chan struct{})
		go func() {
			r.conn.(transport.Splicer).Detach()
			close(done)
		}()
		return done
	}
	testkit.WaitChan(t, detach(), "Detach without a writer")
	require.NoError(t, r.conn.Close())
	testkit.WaitChan(t, detach(), "Detach after Close")
}

// TestTCPCloseWaitsForTheWriter: Close returns only once the writer
// goroutine has stopped (it waited for a socket the peer does not read,
// with spliced frames): after it, nothing reads a splice. Detach after it
// returns at once.
func TestTCPCloseWaitsForTheWriter(t *testing.T) {
	r := newWriterRig(t)
	held := r.fillWriterSpliced(2)
	require.NoError(t, r.conn.Close())
	assert.True(t, tcp.WriterStopped(r.conn), "the writer stopped before Close returned")
	r.conn.(transport.Splicer).Detach()
	scribble(held)
	r.requirePrefixRead()
}

// TestTCPDetachRacesClose: Detach over and over from other goroutines
// while the writer waits for a socket the peer does not read, then Close:
// every call returns, and the peer reads a prefix of what was written
// though the splices are overwritten after Close.
func TestTCPDetachRacesClose(t *testing.T) {
	r := newWriterRig(t)
	held := r.fillWriterSpliced(2)
	stop := detachOverAndOver(t, r.conn)
	closed := make(chan error, 1)
	go func() { closed <- r.conn.Close() }()
	assert.NoError(t, testkit.WaitChan(t, closed, "Close while Detaches run"))
	stop()
	scribble(held)
	r.requirePrefixRead()
}

// TestTCPDetachRacesWrites: Detach over and over from other goroutines
// while spliced runs of every size go out to a peer that reads: every
// frame arrives whole and in order, every buffer is released once, and
// every Detach returns. Run with -race.
func TestTCPDetachRacesWrites(t *testing.T) {
	r := newWriterRig(t)
	r.resume()
	stop := detachOverAndOver(t, r.conn)
	for i := range 60 {
		size := []int{4 << 10, 64 << 10, tcp.HandOffBytes}[i%3]
		r.writeSpliced(size, 1+i%3)
	}
	stop()
	r.settled()
}
