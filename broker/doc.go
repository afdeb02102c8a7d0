// Package broker is the receiving side of the inflight protocol, independent
// of any transport: sessions, per-producer deduplication, and a Store.
//
// A transport that serves (package server over the network, transport/mem
// in process) creates a Session for each connection with Broker.Accept (or
// NewSession) and feeds it every inbound frame with Session.Handle. The
// session answers through the Peer the transport gave it:
//
//	producer                      session                       store
//	HELLO(topic, name, 0)  ->  last, e := store.State(topic, name)
//	                           store.Fence(name, e+1)
//	                           last, _ := store.State(topic, name)
//	                       <-  HELLO_OK(last, e+1)
//	BATCH(first..n)        ->  skip seq <= last (duplicates) ->  Append(topic, name, e+1, rest)
//	                       <-  RECEIPT(n)        (cumulative: all seq <= n stored)
//
// The Store is never called on the transport's goroutine: a session's
// appender goroutine stores what its reader queued, every frame that
// arrived during the previous Append in one Append, and sends one RECEIPT
// for them (see Session). The stores: MemoryStore (in memory, for tests and
// demos), store/file (segment files on one machine), store/natsjs (a NATS
// JetStream stream, for stateless gateways).
//
// Deduplication is by sequence ID per (topic, producer name), so a producer that
// resends after a reconnect never stores a record twice, and learns from
// HELLO_OK which of its pending messages were stored before the connection
// broke. One (topic, producer name) is served by one session at a time: a
// HELLO for a pair that another session of the same identity holds takes it
// over and closes the older session; a HELLO from another identity is
// refused while the holder lives (Stats.TakeoversRefused).
//
// A producer name also has one writer at a time (fencing, see fence.go):
// each Producer instance is an incarnation of its name, with an epoch its
// first HELLO gets and the Store keeps (Store.Fence) before HELLO_OK says
// it; its reconnects present it. A new incarnation fences the older one: a
// live session of it here gets an ERROR of code wire.CodeFenced and is
// closed, a HELLO of it later is refused with one, and the Store refuses
// its Appends, on this broker or any other sharing the Store. With
// wire.Hello.Yield a new incarnation is refused instead (CodeNameInUse)
// while a live session here holds the name.
//
// Identities and authorization: a session's Identity comes from its HELLO's
// token or from the client certificate its transport verified (see
// CertificatePeer), through the Authenticate option, or by default from the
// certificate alone. Authorize decides which topics and producer names an
// identity may use; WithACL does both from an access list (ACL, LoadACL).
// With either option given, whatever is not granted is refused: the HELLO
// gets an ERROR frame of code wire.CodeUnauthorized and Session.Handle
// returns ErrUnauthorized. Without them every HELLO is accepted, and every
// peer without a certificate is the same, anonymous, identity. A HELLO of
// another protocol version gets an ERROR frame of code wire.CodeVersion. A
// store error fails the session with an ERROR frame that gives the cause:
// code wire.CodeStoreUnavailable when the store failed for good or is
// closed (ErrStoreFailed, ErrStoreClosed), else wire.CodeStore; nothing of
// the batch is acknowledged. Records reach the Store with their metadata (key,
// headers, event time) as views into the frame, read without allocating.
package broker
