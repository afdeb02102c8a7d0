// Package layout is the format of inflight records stored in a NATS
// JetStream stream by the natsjs store, for the store itself and for any
// consumer that reads the stream. It has no NATS dependency: a message is
// its header map (nats.Header converts to it) and its data.
//
// Every message carries the header HdrLastSeq, the highest inflight
// sequence ID it holds; the store's LastSeq reads it from the subject's last
// message. HdrLayout names the layout of the message:
//
//   - "packed/1" (Packed): the data is a packed body holding one or more
//     records, their sequence IDs from HdrFirstSeq to HdrLastSeq (gaps are
//     possible). DecodePacked reads it; see AppendPacked for the bytes.
//   - "record/1" (PerRecord): the data is one record's payload, the
//     headers carry its sequence ID (HdrSeq) and metadata: HdrKey (standard
//     base64), HdrEventTime (RFC 3339 with nanoseconds, UTC) and HdrHeaders
//     (standard base64 of the record's headers in the packed encoding).
//     Any NATS consumer can read the payload as it is.
//
// DecodeMessage decodes either layout.
package layout
