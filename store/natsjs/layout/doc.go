// Package layout is the format of inflight records stored in a NATS
// JetStream stream by the natsjs store, for the store itself and for any
// consumer that reads the stream. It has no NATS dependency: a message is
// its header map (nats.Header converts to it), or its header block as
// stored, and its data.
//
// The layouts:
//
//   - native (the default; no HdrLayout): one message per record, its data
//     the payload as sent, its headers HdrProducer, HdrSeq, HdrKey and
//     HdrEventTime in readable text, then the producer's own headers in
//     their order (AppendNativeHeaders has the rules, and the encoding of
//     what cannot be header text as it is); the producer name is also the
//     last token of its subject (records written by earlier builds also
//     carry HdrEpoch, which readers skip). Any NATS consumer
//     reads it; DecodeRaw gives back the record with its headers in order
//     from the header block as stored, DecodeMessage from a header map
//     (which keeps the order of a repeated key's values, not of distinct
//     keys).
//
//   - "packed/1" (Packed): the data is a packed body holding one or more
//     records, their sequence IDs from HdrFirstSeq to HdrLastSeq (gaps are
//     possible). DecodePacked reads it; see AppendPacked for the bytes.
//
//   - "record/1" (PerRecord, written before the native layout): the data
//     is one record's payload, the headers carry its sequence ID (HdrSeq)
//     and metadata: HdrKey (standard base64), HdrEventTime (RFC 3339 with
//     nanoseconds, UTC) and HdrHeaders (standard base64 of the record's
//     headers in the packed encoding).
//
//   - "fence/1" (Fence): no data, no record. The store writes one when a
//     new instance (incarnation) of a producer name takes the name over,
//     and again when a writer claims the name's fence: HdrEpoch is its
//     epoch. Native streams keep fences on a subject of their own; older
//     ones had them on the records' subjects, with HdrLastSeq the
//     subject's last sequence ID then (absent: none).
//
//   - "mark/1" (Mark): no data, no record: the second message of a
//     one-record atomic batch, kept for its check (streams written by
//     earlier builds also have one at the start of each fast batch);
//     never under the records' prefix.
//
// A subject's last message tells its last sequence ID (Tail: HdrSeq of a
// native message, HdrLastSeq of the others). A fence carries HdrEpoch, the
// epoch of the incarnation that wrote it; so do packed messages, records of
// the per-record layout and native records written before the fence alone
// said it (a message without it has epoch 0). DecodeMessage decodes every
// layout.
package layout
