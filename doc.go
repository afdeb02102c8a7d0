// Package inflight is a Go library for high-throughput, reliable asynchronous
// message production.
//
// The producer (package core) keeps every message in a lock-free ring
// (package ringbuf) from SendAsync until its callback has run: the ring, not
// the connection, owns its sequence ID, deadline and state. Timeouts,
// ordering, backpressure and resend after reconnect are properties of the
// ring, so a message handed to SendAsync while the broker is unreachable
// still times out on time, and messages keep their order across reconnects.
//
// Transports (transport/mem in process, transport/tcp over TCP with gnet,
// transport/stdnet over TCP or TLS with the standard library) only write
// frames (package wire) and deliver receipts; the receiving side (package
// broker) deduplicates by sequence ID, so a resend is never stored twice.
//
// This root package holds no code: its tests run one end-to-end suite
// against every transport.
package inflight
