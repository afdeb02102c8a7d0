// Package tcp is a producer's transport over TCP with gnet v2: a Dialer
// whose connections share one gnet event loop. The broker's side is
// package server.
//
// Frames are parsed in gnet's OnTraffic by peeking at the 4-byte length
// prefix first, so a frame is copied at most once and a length over the
// limit is refused before its body is buffered.
//
// Writing: gnet's AsyncWrite has no backpressure (its callback means
// "written or buffered"). The Dialer therefore keeps every outbound buffer
// until its bytes have left gnet's outbound buffer for the socket, and only
// then releases it to the producer; the producer's window (frames
// unacknowledged, core.MaxFramesInFlight) bounds how many it hands over.
// Correctness never depends on gnet calling back: after a close, held
// buffers are simply abandoned.
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
