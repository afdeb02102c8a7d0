// Package layout is the format of inflight records stored in a NATS
// JetStream stream by the natsjs store, for the store itself and for any
// consumer that reads the stream. It has no NATS dependency: a message is
// its header map (nats.Header converts to it) and its data.
//
// Every message but a fence carries the header HdrLastSeq, the highest
// inflight sequence ID it holds; the store's LastSeq reads it from the
// subject's last message (Tail). HdrLayout names the layout of the message:
//
//   - "packed/1" (Packed): the data is a packed body holding one or more
//     records, their sequence IDs from HdrFirstSeq to HdrLastSeq (gaps are
//     possible). DecodePacked reads it; see AppendPacked for the bytes.
//
//   - "record/1" (PerRecord): the data is one record's payload, the
//     headers carry its sequence ID (HdrSeq) and metadata: HdrKey (standard
//     base64), HdrEventTime (RFC 3339 with nanoseconds, UTC) and HdrHeaders
//     (standard base64 of the record's headers in the packed encoding).
//     Any NATS consumer can read the payload as it is.
//
//   - "fence/1" (Fence): no data, no record. The store writes one when a
//     new instance (incarnation) of a producer name takes the name over:
//     HdrEpoch is its epoch, HdrLastSeq the subject's last sequence ID
//     then (absent: none).
//
// Every message written by a producer that was fenced in carries HdrEpoch,
// its incarnation's epoch; the store refuses to write a subject whose last
// message has a higher one. Messages without HdrEpoch have epoch 0.
// DecodeMessage decodes every layout.
package layout
