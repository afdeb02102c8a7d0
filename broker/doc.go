// Package broker is the receiving side of the inflight protocol, independent
// of any transport: sessions, per-producer deduplication, and a Store.
//
// A transport (transport/mem, transport/tcp) accepts connections and, for
// each one, creates a Session with Broker.NewSession and feeds it every
// inbound frame with Session.Handle. The session answers through the Peer the
// transport gave it:
//
//	producer                      session                       store
//	HELLO(name)          ->  last := store.LastSeq(name)
//	                     <-  HELLO_OK(last)
//	BATCH(first..n)      ->  skip seq <= last (duplicates) ->  Append(rest)
//	                     <-  RECEIPT(n)        (cumulative: all seq <= n stored)
//
// Deduplication is by sequence ID per producer name, so a producer that
// resends after a reconnect never stores a record twice, and learns from
// HELLO_OK which of its pending messages were stored before the connection
// broke. One producer name is served by one session at a time: a HELLO for a
// name that another session holds takes it over and closes the older session.
package broker
