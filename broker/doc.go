// Package broker is the receiving side of the inflight protocol, independent
// of any transport: sessions, per-producer deduplication, and a Store.
//
// A transport that serves (package server over the network, transport/mem
// in process) creates a Session for each connection with Broker.Accept (or
// NewSession) and feeds it every inbound frame with Session.Handle. The
// session answers through the Peer the transport gave it. One connection
// carries every topic of its producer (protocol version 4):
//
//	producer                      session                          store
//	HELLO(name, epoch 0)     ->  e := State(·, name).Epoch
//	                             Fence(name, e+1)                  (every topic of the name)
//	                         <-  HELLO_OK(e+1)
//	TOPIC(id 1, "orders")    ->  Authorize; State("orders", name)  (one round trip per topic)
//	                         <-  TOPIC_OK(1, last)
//	BATCH(id 1, first..n)    ->  skip seq <= last (duplicates) ->  Append("orders", name, e+1, rest)
//	                         <-  RECEIPT(1:n, 2:m, ...)            (cumulative per topic; several
//	                                                                topics' receipts in one frame)
//
// The Store's State, Fence and Append never run on the transport's
// goroutine: the HELLO's State and Fence run on a goroutine of the
// session, and each topic runs one while it has work (its State, then its
// Appends, every frame that arrived during the previous Append in one
// Append), so a slow Fence holds up its own HELLO (and later HELLOs of the
// same name) but not the connection's reader, which keeps answering PINGs,
// nor other connections; topics of one connection never wait for each
// other, and an idle topic costs no goroutine (see Session). Session.Close,
// which the transport calls once the connection stopped reading, waits for
// those calls and then unpins the name (see Pinner).
// The stores: MemoryStore (in memory, for tests and demos), store/file
// (segment files on one machine), store/natsjs (a NATS JetStream stream,
// for stateless gateways).
//
// Deduplication is by sequence ID per (topic, producer name), so a producer
// that resends after a reconnect never stores a record twice, and learns
// from TOPIC_OK which of its pending messages on that topic were stored
// before the connection broke. A store error on one topic ends that topic
// alone (TOPIC_ERROR; its queued frames are dropped, unacknowledged; the
// producer may declare it again) and the connection goes on.
//
// A producer name has one writer at a time across all its topics (fencing,
// see fence.go): each Producer instance is an incarnation of its name, with
// an epoch its first HELLO gets and the Store keeps (Store.Fence) before
// HELLO_OK says it; its reconnects present it. A new incarnation fences the
// older one on every topic, including topics the new one has not declared:
// a live session of it here gets an ERROR of code wire.CodeFenced and is
// closed, a HELLO of it later is refused with one, and the Store refuses
// its Appends on every topic, on this broker or any other sharing the
// Store. With wire.Hello.Yield a new incarnation is refused instead
// (CodeNameInUse) while a live session here holds the name. A HELLO for a
// name that a live session of another identity holds is refused
// (Stats.TakeoversRefused).
//
// Identities and authorization: a session's Identity comes from its HELLO's
// token or from the client certificate its transport verified (see
// CertificatePeer), through the Authenticate option, or by default from the
// certificate alone. Authorize decides which topics and producer names an
// identity may use; WithACL does both from an access list (ACL, LoadACL).
// With either option given, whatever is not granted is refused: a HELLO for
// a name the identity may use on no topic gets an ERROR frame of code
// wire.CodeUnauthorized and Session.Handle returns ErrUnauthorized; a TOPIC
// the identity may not write gets a TOPIC_ERROR of that code, and the
// connection goes on. Without them every HELLO is accepted, and every
// peer without a certificate is the same, anonymous, identity. A HELLO of
// another protocol version (a producer of version 3, which names its topic
// in HELLO) gets an ERROR frame of code wire.CodeVersion that says so. A
// store that failed for good or is closed (ErrStoreFailed, ErrStoreClosed)
// fails the session with an ERROR frame of code
// wire.CodeStoreUnavailable; nothing of the batch is acknowledged. Records
// reach the Store with their metadata (key, headers, event time) as views
// into the frame, read without allocating.
package broker
