// Package stdnet carries inflight frames over TCP, or TLS, with the
// standard library (net and crypto/tls): a client Dialer for producers and a
// Server that serves a broker.Broker. It speaks exactly the frames of
// transport/tcp, so either client works with either server.
//
// Why a second network transport: gnet, under transport/tcp, has no TLS.
// The name is stdnet rather than tls so that code using it can also import
// crypto/tls without renaming one of them.
//
// TLS: ClientTLS and ServerTLS turn it on (without them both sides speak
// plain TCP); TLS 1.3 is the minimum unless the config says otherwise.
// RequireClientCert turns on mutual TLS; the server then hands the
// verified client certificate to the broker session (broker.CertificatePeer),
// which a broker with authentication maps to an identity. A server started with one
// certificate can swap it without a restart (Server.ReloadCertificate, or
// ReloadCertificateFiles on SIGHUP); new handshakes get the new one. A
// failed handshake makes Dial return ErrHandshake wrapping the crypto/tls
// error, which the producer reports to its ErrorHandler before it dials
// again with backoff.
//
// Goroutines: each client connection has a writer goroutine and a reader
// goroutine, owned by its Dialer; Dialer.Close stops them all. A Server has
// an accept goroutine and one goroutine per connection, which reads frames,
// runs the broker session and writes its replies; Server.Close stops them
// all. The producer's Handler runs on the reader goroutine.
//
// Writing: WriteFrame queues the producer's buffer, it does not copy it. The
// writer releases a buffer once its bytes were written to the socket, so
// the producer's pool of buffers, its window, bounds what the transport
// holds: a broker that stops reading stops the producer's pump instead of
// growing memory. WriteQueue is a hard limit for callers without a window.
//
// Reading: both sides read through a buffer and check a frame's length
// prefix before reading its body, so a length over the limit is refused at
// once, and a large frame is held in a buffer that grows with the bytes
// actually received, not with the length claimed.
//
// Hardening (Server): a frame too large, a malformed one, or one a session
// rejects gets an ERROR frame, and that connection alone is closed.
// MaxConns limits connections; ReadTimeout closes a connection that
// trickles a frame (slowloris); HandshakeTimeout one that does not finish
// its TLS handshake; IdleTimeout one that sends nothing; WriteTimeout one
// that does not read its receipts. These
// are read and write deadlines on the socket: no ticker.
//
// Scheduling: unlike a gnet event loop, a goroutine blocked in a read
// holds no P (the runtime's network poller parks it), so the cause of the
// millisecond tail that transport/tcp's package doc describes (event loops
// holding the process's Ps in epoll_wait) does not exist here. What that is
// worth at a given load is measured by BenchmarkFixedRate in bench/, which
// runs over both.
package stdnet
