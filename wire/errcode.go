package wire

import (
	"errors"
	"strconv"
)

// ErrorCode is the reason carried by an ERROR frame.
type ErrorCode uint16

// Error codes. Decoders accept any value, so that a peer speaking a newer
// version can still report its reason; String names the unknown ones by number.
const (
	CodeProtocol         ErrorCode = 1 // a frame broke the protocol
	CodeFrameTooLarge    ErrorCode = 2 // a frame exceeded the negotiated limit
	CodeChecksum         ErrorCode = 3 // a batch failed its CRC
	CodeUnsupportedCodec ErrorCode = 4 // a batch used a codec the broker cannot read
	CodeHelloRequired    ErrorCode = 5 // a frame arrived before HELLO
	CodeReplaced         ErrorCode = 6 // another connection took over this producer name
	CodeStore            ErrorCode = 7 // the broker's store failed
	CodeVersion          ErrorCode = 8 // the HELLO version is not supported
	CodeInternal         ErrorCode = 9 // any other broker failure
	// CodeStoreUnavailable: the broker's store failed for good (a full disk,
	// an I/O error) or is closed; nothing is stored until the broker is
	// restarted. The text says why.
	CodeStoreUnavailable ErrorCode = 10
	// CodeUnauthorized: the HELLO's identity may not use its topic or name,
	// or another identity holds the name.
	CodeUnauthorized ErrorCode = 11
	// CodeFenced: a newer incarnation of the producer's name holds it (a
	// HELLO of a lower epoch, or a session the newer one took over): this
	// producer may not write the name again. Nothing of the batch in
	// flight, if any, was acknowledged.
	CodeFenced ErrorCode = 12
	// CodeNameInUse: a HELLO with Yield asked for a new epoch while a live
	// session of another incarnation holds the name.
	CodeNameInUse ErrorCode = 13
)

var codeNames = [...]string{
	CodeProtocol:         "protocol",
	CodeFrameTooLarge:    "frame too large",
	CodeChecksum:         "checksum",
	CodeUnsupportedCodec: "unsupported codec",
	CodeHelloRequired:    "hello required",
	CodeReplaced:         "replaced",
	CodeStore:            "store",
	CodeVersion:          "version",
	CodeInternal:         "internal",
	CodeStoreUnavailable: "store unavailable",
	CodeUnauthorized:     "unauthorized",
	CodeFenced:           "fenced",
	CodeNameInUse:        "name in use",
}

// String returns a short lower-case name, or "ErrorCode(n)" for unknown codes.
func (c ErrorCode) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// CodeOf returns the code a broker should send for an error returned by
// this package: ErrFrameTooLarge, ErrChecksum, ErrUnsupportedCodec and
// ErrVersion map to their own codes, anything else (nil included) to
// CodeProtocol.
func CodeOf(err error) ErrorCode {
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return CodeFrameTooLarge
	case errors.Is(err, ErrChecksum):
		return CodeChecksum
	case errors.Is(err, ErrUnsupportedCodec):
		return CodeUnsupportedCodec
	case errors.Is(err, ErrVersion):
		return CodeVersion
	default:
		return CodeProtocol
	}
}

// RemoteError is an ERROR frame received from the peer, as an error value.
// Obtain one with Error.Err and inspect it with errors.As.
type RemoteError struct {
	Code ErrorCode
	Text string
}

// Error returns "inflight/wire: remote error <code>: <text>", leaving out
// ": <text>" when the text is empty.
func (e *RemoteError) Error() string {
	s := "inflight/wire: remote error " + e.Code.String()
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}
