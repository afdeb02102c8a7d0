package wire

import (
	"fmt"
	"io"
	"log/slog"
)

// Token is a secret a producer presents in HELLO to authenticate. It is a
// string, but it never prints: String, GoString, Format (every verb, also
// as a field of a struct printed with %v or %+v) and LogValue (log/slog)
// all give Redacted, so a Hello or an error that holds one can be logged.
// Compare tokens only in constant time (crypto/subtle).
type Token string

// Redacted is what a Token prints as.
const Redacted = "[token redacted]"

// String returns Redacted.
func (Token) String() string { return Redacted }

// GoString returns Redacted, for %#v.
func (Token) GoString() string { return Redacted }

// Format writes Redacted whatever the verb.
func (Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, Redacted) }

// LogValue returns Redacted, for log/slog.
func (Token) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalText returns Redacted, for encoders such as encoding/json.
func (Token) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
