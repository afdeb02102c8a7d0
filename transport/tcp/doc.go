// Package tcp is a producer's transport over TCP with gnet v2: a Dialer
// whose connections share one gnet event loop. The broker's side is
// package server.
//
// Reading: frames are parsed in gnet's OnTraffic by peeking at the 4-byte
// length prefix first, so a frame is copied at most once and a length over
// the limit is refused before its body is buffered.
//
// Writing: WriteFrame writes the frame to the socket itself, a non-blocking
// write on the caller's goroutine, and releases the buffer as soon as the
// socket has taken all of it; the event loop takes no part. What the socket
// does not take at once goes to gnet (AsyncWrite), and so does every frame
// after it, in order, until gnet has written all it holds; then writing
// comes back to the caller's goroutine. gnet's AsyncWrite has no
// backpressure (its callback means "written or buffered"): the Dialer keeps
// every buffer it handed to gnet until its bytes have left gnet's outbound
// buffer for the socket, and only then releases it to the producer; the
// producer's window (frames unacknowledged, core.MaxFramesInFlight) bounds
// how many it hands over. Correctness never depends on gnet calling back:
// after a close, held buffers are simply abandoned. No write starts once
// the connection is closed, by Close, by a failed write or by the event
// loop (which marks it closed before it closes the descriptor). On
// platforms other than Unix every frame goes through gnet.
//
// Goroutines: a Dialer owns one gnet client (its event loop and ticker),
// started by NewDialer and stopped by Close. The producer's Handler (its
// receipt resolver) runs on the event loop.
//
// Scheduling: a gnet event loop waits for events in epoll_wait, a system
// call, and keeps its P (one of GOMAXPROCS) while it waits, until the
// runtime's sysmon takes the P back, which can take from 20 µs to 10 ms
// when the process is otherwise idle. When every P is held this way, the
// other goroutines (senders, the producer's pump and callbacks) wait that
// long. Each Dialer has one event loop; the broker's server has none (a
// goroutine blocked in a read holds no P). BenchmarkFixedRate/tcp in bench/
// measures the tail this leaves at 100k msgs/s.
package tcp
