package wire

import "strings"

// Reason returns err's text as an ERROR or TOPIC_ERROR frame carries it:
// without the package prefixes ("inflight: ", "inflight/broker: ", ...)
// that this module's errors begin with, which say where an error was made,
// not what happened. The producer quotes the errors it wraps the same way.
//
// It takes the parts from err's tree (Unwrap), not by splitting the text:
// an error's own words are its text with the texts of the errors it wraps
// taken out, and only the words an error begins with lose a prefix. So
//
//	fmt.Errorf("%w: %w", broker.ErrProtocol, wire.ErrVersion)
//
// reads "protocol violation: unsupported protocol version", while the
// words an error quotes from elsewhere (a path, a peer's text, an error
// formatted with %v) are kept as they are.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var b strings.Builder
	writeReason(&b, err)
	return b.String()
}

// writeReason writes err's reason: its own words, minus a leading package
// prefix, around the reasons of the errors it wraps, in the order their
// texts appear in err's. A wrapped error whose text err does not show (its
// Error words it otherwise) is left out of the walk.
func writeReason(b *strings.Builder, err error) {
	s := err.Error()
	var kids []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		kids = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		kids = u.Unwrap()
	}
	start := true // s still begins with err's first words
	for _, k := range kids {
		if k == nil {
			continue
		}
		ks := k.Error()
		i := strings.Index(s, ks)
		if ks == "" || i < 0 {
			continue
		}
		own := s[:i]
		if start {
			own = trimPrefix(own)
		}
		b.WriteString(own)
		writeReason(b, k)
		s, start = s[i+len(ks):], false
	}
	if start {
		s = trimPrefix(s)
	}
	b.WriteString(s)
}

// trimPrefix returns s without a leading "inflight: " or
// "inflight/<package>: ".
func trimPrefix(s string) string {
	rest, ok := strings.CutPrefix(s, "inflight")
	if !ok {
		return s
	}
	if r, ok := strings.CutPrefix(rest, ": "); ok {
		return r
	}
	if pkg, r, ok := strings.Cut(rest, ": "); ok && len(pkg) > 1 && pkg[0] == '/' && !strings.ContainsAny(pkg, " :") {
		return r
	}
	return s
}
