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
// Large runs (Linux): a WriteFrame or WriteFrames of 512 KiB or more, as a
// producer of large messages at full speed writes, goes to the connection's
// writer goroutine instead, and so does every frame after it while the
// writer holds any: it writes them through a duplicate of the socket's
// descriptor that is on the runtime's poller (a full socket parks it in the
// Go scheduler) and releases each buffer once the socket has taken it,
// while the producer's pump builds its next frames. The socket gets the frames in the order they
// were handed over: only one of the three ways holds bytes at a time. Once
// the connection is closed the writer starts no write; one it is in (up to
// the rest of its batch, or until the socket is full) may still finish, as
// gnet's own close flushes what gnet holds.
//
// Frames with splices (Linux; transport.Splicer, core.ZeroCopyMin): their
// payloads are written from where they are, with writev, by the caller's
// goroutine (under the connection's mutex) or by the writer; what the
// socket does not take of a direct write goes to gnet copied, so only the
// writer holds payloads across time. Detach copies the frames queued for
// the writer and has it copy the rest of the batch it writes (a writer
// waiting for room is woken by a write deadline in the past, answers, and
// waits again): it waits for one write at most, never for the network.
//
// Goroutines: a Dialer owns one gnet client (its event loop and ticker),
// started by NewDialer and stopped by Close. A connection owns its writer,
// started by its first large run and stopped when the connection closes;
// the connection's Close waits for it (so that nothing reads a payload
// after it), and the Dialer's Close waits for every writer. The
// producer's Handler (its receipt resolver) runs on the event loop.
//
// Scheduling: gnet's event loop waits for events in epoll_wait, a system
// call, and keeps its P (one of GOMAXPROCS) while it waits, until the
// runtime's sysmon takes the P back; sysmon seldom does for waits shorter
// than its own sleep, which grows from 20 µs to 10 ms while it finds
// nothing to take. On two cores that left the other goroutines (senders,
// the producer's pump and callbacks, a broker in the same process) one P
// most of the time. On Linux the Dialer parks the loop instead when inbound
// bytes come far apart (100 µs or more, as receipts do for a producer at
// full speed): until one of its connections has inbound bytes, or
// something else is queued for the loop (Dial, Close, Dialer.Close, frames
// left to gnet), a task on the loop waits in the Go scheduler, through the
// runtime's poller, on an epoll instance of the Dialer's own that watches
// the sockets for reading, and holds no P; gnet then runs as it would have.
// When inbound bytes come closer together (a paced producer's receipts),
// the loop waits in epoll_wait, where the kernel wakes its thread at once
// (parked, it waits until a thread of the runtime next polls); if that wait
// lasts, because the traffic stopped, sysmon takes its P within some 20 ms.
// Elsewhere than Linux, and for a Dialer whose sockets its epoll instance
// cannot watch, the loop always waits in gnet's poller.
// BenchmarkSendAsync/tcp and BenchmarkFixedRate/tcp in bench/ measure both
// sides.
package tcp
