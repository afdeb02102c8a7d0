// Package tcp carries inflight frames over TCP with gnet v2: a client
// Dialer for producers and a Server that serves a broker.Broker.
//
// Both sides parse frames in gnet's OnTraffic by peeking at the 4-byte length
// prefix first, so a frame is copied at most once and a length over the
// limit is refused before its body is buffered.
//
// Writing: gnet's AsyncWrite has no backpressure (its callback means
// "written or buffered"). The client therefore keeps every outbound buffer
// until its bytes have left gnet's outbound buffer for the socket, and only
// then releases it to the producer, whose pool of buffers is the window: a
// peer that stops reading stops the producer's pump instead of growing
// memory. Correctness never depends on gnet calling back: after a close, held
// buffers are simply abandoned.
//
// Goroutines: a Dialer owns one gnet client (its event loop and ticker),
// started by NewDialer and stopped by Close. A Server owns one gnet engine,
// started by NewServer and stopped by Close. Handlers (the producer's
// receipt resolver, the broker's sessions) run on the event loops.
//
// Scheduling: a gnet event loop waits for events in epoll_wait, a system
// call, and keeps its P (one of GOMAXPROCS) while it waits, until the
// runtime's sysmon takes the P back, which can take from 20 µs to 10 ms
// when the process is otherwise idle. When every P is held this way, the
// other goroutines (senders, the producer's pump and callbacks) wait that
// long. Give the process more Ps than it has event loops: each Dialer has
// one, a Server one (or one per core with Multicore). Measured with a
// producer and a broker in one process at 100k msgs/s
// (BenchmarkFixedRate/tcp): p99 0.9-2.2 ms at GOMAXPROCS=2, 0.3-0.5 ms at 3.
package tcp
