package core

import "github.com/inflightmq/inflight/wire"

// Token sets the token the producer presents in HELLO to authenticate
// (default: none). A broker with authentication maps it to an identity and
// decides which topics and producer names that identity may use; one
// without ignores it. The token never prints (see wire.Token): not in
// errors, not in a Producer's or an option's formatted value. A broker
// that predates tokens refuses a HELLO with one (an ERROR of code
// wire.CodeProtocol). Send it only over TLS (transport/stdnet): on plain
// TCP anyone on the path can read it.
func Token(token string) Option {
	return optionFunc(func(c *config) error {
		if len(token) > wire.MaxTokenLen {
			return invalid("Token", len(token), "bytes, more than wire.MaxTokenLen")
		}
		// Kept behind a pointer: fmt cannot call Token's Format on an
		// unexported field and would print the bytes of a string, while it
		// prints a pointer field as an address.
		tok := wire.Token(token)
		c.token = &tok
		return nil
	})
}
