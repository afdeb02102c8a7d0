package natsjs

import "encoding/base64"

// Token maps a name to one NATS subject token. A name made only of
// [A-Za-z0-9_-] is its own token; any other name (empty, with '.', '*',
// '>', spaces, non-ASCII, or starting with '=') becomes "=" followed by its
// unpadded base64url, which uses none of those. Distinct names give distinct
// tokens: a plain token never starts with '='.
func Token(name string) string {
	if name == "" || !plain(name) {
		return "=" + base64.RawURLEncoding.EncodeToString([]byte(name))
	}
	return name
}

func plain(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Name reverses Token. ok is false for a token Token cannot make.
func Name(token string) (name string, ok bool) {
	if token == "" {
		return "", false
	}
	if token[0] != '=' {
		return token, plain(token)
	}
	b, err := base64.RawURLEncoding.DecodeString(token[1:])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Subject returns the subject of (topic, producer) under prefix:
// prefix.Token(topic).Token(producer).
func Subject(prefix, topic, producer string) string {
	return prefix + "." + Token(topic) + "." + Token(producer)
}
