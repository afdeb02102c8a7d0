// Package stdnet is a producer's transport over TCP, or TLS, with the
// standard library (net and crypto/tls). It speaks exactly the frames of
// transport/tcp; the broker's side is package server.
//
// Why a second producer transport: gnet, under transport/tcp, has no TLS.
// The name is stdnet rather than tls so that code using it can also import
// crypto/tls without renaming one of them.
//
// TLS: ClientTLS turns it on (without it the Dialer speaks plain TCP); TLS
// 1.3 is the minimum unless the config says otherwise. For mutual TLS put
// the client's certificate in the config. A failed handshake makes Dial
// return ErrHandshake wrapping the crypto/tls error, which the producer
// reports to its ErrorHandler before it dials again with backoff.
//
// Goroutines: each connection has a writer goroutine and a reader
// goroutine, owned by its Dialer; Dialer.Close stops them all. The
// producer's Handler runs on the reader goroutine.
//
// Writing: WriteFrame queues the producer's buffer, it does not copy it. The
// writer releases a buffer once its bytes were written to the socket; the
// producer's window (frames unacknowledged, core.MaxFramesInFlight) bounds
// what the transport holds. WriteQueue is a hard limit for callers without
// a window.
//
// Reading: frames are read through a buffer, and a frame's length prefix is
// checked before its body is read.
package stdnet
