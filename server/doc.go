// Package server serves a broker.Broker over TCP, or TLS, with the
// standard library: the one network server of an inflight broker. Any
// producer transport speaks to it (transport/tcp, transport/stdnet).
//
// Goroutines: a Server has an accept goroutine and, per connection, one
// goroutine that reads frames and hands them to the connection's broker
// session; the session runs the Store's calls on goroutines of its own
// (the HELLO's Fence on one, each topic's State and Appends, and its
// receipts, on one per topic while it has work: see broker.Session). So a
// slow Store holds up its own topic, or HELLO, and nothing else: other
// connections keep storing, and every connection keeps reading frames and
// answering PINGs while its Fence or Append is in flight. Close stops them
// all.
//
// Why the standard library and not an event loop: with the Store off the
// reader's goroutine, a goroutine per connection measured as fast as gnet
// with per-connection workers, or faster (docs/performance.md), and a
// goroutine blocked in a read holds no P: the runtime's network poller
// parks it. TLS comes with it.
//
// TLS: the TLS option turns it on (plain TCP without it); TLS 1.3 is the
// minimum unless the config says otherwise. RequireClientCert turns on
// mutual TLS; the server hands the verified client certificate to the
// broker session (broker.CertificatePeer), which a broker with
// authentication maps to an identity. A server started with one
// certificate can swap it without a restart (Server.ReloadCertificate, or
// ReloadCertificateFiles on SIGHUP); new handshakes get the new one.
//
// Reading: a connection reads through a 4 KiB buffer and checks a frame's
// length prefix before reading its body, so a length over the limit is
// refused at once, and a large frame is held in a buffer that grows with
// the bytes actually received, not with the length claimed, taken from a
// pool and given back at the next frame. Between frames a connection holds
// about 15 KiB (buffers, session, goroutine stacks; TLS adds its own
// record buffers); what its frames cost once read is charged to the
// broker's budget (broker.MaxBufferedBytes).
//
// Hardening: a frame too large, a malformed one, or one a session rejects
// gets an ERROR frame, and that connection alone is closed. Before its
// HELLO a connection may send nothing but the HELLO (a PING is refused),
// within HandshakeTimeout of being accepted (its TLS handshake included).
// MaxConns limits connections and MaxPendingConns, among them, those
// without a HELLO yet; a new connection takes the place of the oldest of
// those rather than be refused, so they cannot keep producers out.
// ReadTimeout closes a connection that trickles a frame (slowloris);
// IdleTimeout one that sends nothing; WriteTimeout one that does not read
// its receipts. These are read and write deadlines on the socket: no
// ticker. Every connection refused or closed before its HELLO for one of
// these reasons, a failed TLS handshake or plain TCP on a TLS port is
// counted in Stats and reported once to OnRefused.
package server
