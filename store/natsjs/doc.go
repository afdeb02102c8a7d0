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
// # What stays exact
//
// Each (topic, producer) has its own subject, PREFIX.<topic
// tokens>.<producer> (see Subject). Every message carries the header
// Inflight-Last-Seq, the highest inflight sequence ID it holds; State reads
// it from the subject's last message. Every write is a compare-and-set on
// the subject's tail (Nats-Expected-Last-Subject-Sequence = the stream
// sequence of the last message as the store knows it). When it
// fails, someone else wrote: another gateway still finishing a write for a
// producer that has moved on, or this store's own write whose
// acknowledgement was lost. The store then re-reads the tail from the
// stream leader, drops the records it holds and writes the rest. So each
// record is stored once and in sequence order, however many writers race,
// with no time window (unlike Nats-Msg-Id deduplication).
//
// Every message also carries Inflight-Epoch, the epoch of the producer
// instance that wrote it (see broker.Store): Fence writes a fence message
// with the new epoch on the name's fence subject (FenceSubject, outside
// PREFIX.>, where consumers do not look), by the same compare-and-set, and
// every Append checks that fence in the same atomic batch as its records,
// so a fenced instance writing through another gateway stops there.
//
// The nats.Conn must not buffer publishes while reconnecting (Connect sets
// it up; New refuses one that would): the inflight ring is the only window
// of records not yet acknowledged, and every write is a synchronous
// request bounded by Config.Timeout.
//
// # Layouts
//
// LayoutNative (the default) writes one plain message per record, its
// data the payload, its key, event time and headers as NATS headers: any
// NATS consumer on PREFIX.<topic>.> reads the records. LayoutPacked, for raw
// ingest, writes the records of one Append in one message, split into
// compare-and-set-chained messages over the server's max_payload. Package
// layout decodes both, with every record's key, headers and event time.
//
// # Retention
//
// The stream must keep a subject's last message for as long as its
// producer may come back with messages pending: once it ages out, State's
// LastSeq falls back to 0 and resent records are stored again. EnsureStream
// creates a stream with limits retention and the replicas, storage, age and
// size asked for, or checks an existing one.
package natsjs
