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
package tcp
