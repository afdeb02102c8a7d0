// Package natsjs is a broker.Store on NATS JetStream: an inflight broker
// whose records live in a replicated stream. Any number of brokers may
// serve the same producers (stateless gateways, `inflight serve` on
// NATS), or a producer embeds one in its own process with no gateway hop:
//
//	nc, _ := natsjs.Connect("nats://a:4222,nats://b:4222,nats://c:4222")
//	store, _ := natsjs.New(ctx, nc, natsjs.Config{Stream: "INFLIGHT"})
//	b, _ := broker.New(store)
//	p, _ := core.New(mem.NewDialer(b), core.Name("orders-1"))
//
// # What a NATS consumer sees
//
// In the native layout (the default) every record is one stream message on
// PREFIX.<topic tokens>.<producer> (Subject, whose last token names the
// producer): its data is the payload, its sequence ID, key and event time
// are headers a person can read, and the producer's headers are NATS
// headers with their own keys, in their order (package layout has the
// details). Nothing else is written under PREFIX.>: a producer name's
// fence and the check marks of its atomic writes are on
// _INFLIGHT.PREFIX.fence.<producer> and _INFLIGHT.PREFIX.mark.<producer>,
// in the same stream.
//
// # What stays exact
//
// Every write is conditional on the producer name's fence (the stream
// sequence of the fence subject's last message, as the store knows it:
// Nats-Expected-Last-Subject-Sequence), and an atomic batch also on the
// records subject's tail. When a check fails, someone
// else wrote: another gateway still finishing a write for a producer that
// has moved on, a newer incarnation of the name, or this store's own write
// whose acknowledgement was lost. The store then re-reads both from the
// stream leader, drops the records the stream holds and writes the rest,
// or fails with broker.ErrFenced when the fence is newer than the
// writer's epoch. So each record is stored once and in sequence order,
// however many writers race, with no time window (unlike Nats-Msg-Id
// deduplication).
//
// A store writes for a fenced name only under a fence it wrote itself (it
// claims the fence, writing it again with the same epoch, when it did
// not), so anyone else's next write fails its check. On a stream of one
// replica that allows batch publish, an Append is one ADR-50 fast batch
// whose every record checks the fence, written when the store also knows
// the subject's tail under that fence: nobody else's record can land
// between two of the batch's, nor between the tail the store knows and
// its first. Elsewhere an Append is written in atomic batches. Fence
// writes a new epoch by a compare-and-set on the fence's subject.
//
// The store writes its batches through a connection of its own to the
// server nc is connected to (it builds the protocol frames itself: that is
// what keeps the producer's header order, and what makes a batch cheap),
// and reads, fences and takes the server's replies through nc. nc must
// not buffer publishes while reconnecting (Connect sets it up; New refuses
// one that would): the inflight ring is the only window of records not yet
// acknowledged, and every write is bounded by Config.Timeout.
//
// # Layouts
//
// LayoutNative, above. LayoutPacked writes the records of one Append in one
// message (split into compare-and-set-chained messages over the server's
// max_payload), for raw ingest: only layout.DecodeMessage and `inflight
// read` read it. Package layout decodes every layout, including those of
// streams written before the native one.
//
// # Retention
//
// The stream must keep a subject's last message, and a name's fence, for
// as long as its producer may come back with messages pending: once they
// age out, LastSeq falls back to 0 and resent records are stored again.
// EnsureStream creates a stream with limits retention and the replicas,
// storage, age and size asked for, or checks an existing one.
package natsjs
