package transport

// The serving side as a transport sees it. A transport that runs the
// serving side itself (transport/mem, in process; the network server)
// knows it only through these interfaces, which *broker.Broker
// implements, so that no transport imports the broker.

// Acceptor opens a Session for each connection a transport accepts.
// *broker.Broker is one. Accept is safe for concurrent use.
type Acceptor interface {
	Accept(peer Peer) Session
}

// Session is the serving side of one connection. The transport calls
// Handle with every complete inbound frame, in order, from one goroutine at
// a time, then Close once; the frame is valid only during the call. Handle
// may block for a bounded time (it waits for room while the frames already
// handed over are being stored), never for ever. A non-nil error from
// Handle means the connection must end: the session has already sent the
// ERROR frame it owes the peer, if any.
type Session interface {
	Handle(frame []byte) error
	// Close ends the session; it returns once the session's own
	// goroutines have stopped. Frames handed to Handle may still be
	// stored and acknowledged before it returns.
	Close()
}

// Keeper is a Session that can keep a frame's memory instead of copying
// it. HandleKeep is Handle for a frame the transport gives away: the
// session calls release exactly once, from any goroutine, when it no
// longer needs frame (for a BATCH it stores, after the Append), and the
// transport does not reuse the frame's memory before. A transport whose
// frames arrive in buffers of their own (transport/mem; the server's large
// frames) saves a copy of every BATCH; it uses Handle for the others.
type Keeper interface {
	HandleKeep(frame []byte, release func()) error
}

// Peer is where a Session's outbound frames go: the transport's side of
// a served connection.
type Peer interface {
	// Send writes frame to the producer, or queues it to be written in
	// the order of the Send calls. frame is valid only during the call.
	// Send is safe for concurrent use: a session sends replies from its
	// reader (HELLO_OK, PONG, ERROR), from the goroutine that stores
	// (RECEIPT, ERROR), and another session's reader sends the ERROR that
	// fences this one. After the connection closed it returns an error
	// and sends nothing. It may block while the producer does not read,
	// for a bounded time.
	Send(frame []byte) error
	// Close ends the connection after the frames already sent, as far as
	// the transport can deliver them. It is idempotent and safe from any
	// goroutine: a session calls it when its store failed, and on another
	// session's peer when it takes over that session's producer name.
	Close() error
}
