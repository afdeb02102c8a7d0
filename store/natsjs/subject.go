package natsjs

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Subjects. A record of topic "orders.eu" by producer "svc-1" is stored on
//
//	PREFIX.orders.eu.svc-1
//
// the topic's own tokens and the producer name as one token, so that a NATS
// consumer on PREFIX.orders.> or PREFIX.orders.eu.* selects what it means.
// Nothing else is written under PREFIX.>: a producer name's fence is on
//
//	_INFLIGHT.PREFIX.fence.svc-1
//
// and the check marks of one-record atomic batches (see Store.writeAtomic) on
//
//	_INFLIGHT.PREFIX.mark.svc-1
//
// both in the same stream, which captures PREFIX.> and _INFLIGHT.PREFIX.>.

// fenceRoot is the first token of the subjects where consumers do not look.
const fenceRoot = "_INFLIGHT"

// CheckTopic says why topic cannot be the subject tokens of a topic (nil:
// it can): it must be one or more tokens separated by '.', none empty, none
// holding a space, a control character, '*' or '>', and none beginning
// with '=' (which marks the encoded names of streams written before the
// native layout).
func CheckTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidName)
	}
	for tok := range strings.SplitSeq(topic, ".") {
		if err := checkToken(tok); err != nil {
			return fmt.Errorf("%w: topic %q: %v", ErrInvalidName, topic, err)
		}
	}
	return nil
}

// CheckProducer says why name cannot be the subject token of a producer
// (nil: it can): as a topic's token (see CheckTopic), and no '.'.
func CheckProducer(name string) error {
	if strings.Contains(name, ".") {
		return fmt.Errorf("%w: producer name %q: '.' would make it several subject tokens", ErrInvalidName, name)
	}
	if err := checkToken(name); err != nil {
		return fmt.Errorf("%w: producer name %q: %v", ErrInvalidName, name, err)
	}
	return nil
}

func checkToken(tok string) error {
	if tok == "" {
		return fmt.Errorf("an empty subject token")
	}
	if tok[0] == '=' {
		return fmt.Errorf("a subject token beginning with '='")
	}
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c <= ' ', c == 0x7f:
			return fmt.Errorf("a space or control character")
		case c == '*', c == '>':
			return fmt.Errorf("the wildcard %q", c)
		}
	}
	return nil
}

// Subject returns the subject of (topic, producer) under prefix:
// prefix.topic.producer. It does not check the names (CheckTopic,
// CheckProducer).
func Subject(prefix, topic, producer string) string {
	return prefix + "." + topic + "." + producer
}

// FenceSubject returns the subject of producer's fence for a stream of
// prefix, outside prefix.>.
func FenceSubject(prefix, producer string) string {
	return fenceRoot + "." + prefix + ".fence." + producer
}

func markSubject(prefix, producer string) string {
	return fenceRoot + "." + prefix + ".mark." + producer
}

// fenceSpace returns the subjects of the fences and marks of prefix.
func fenceSpace(prefix string) string { return fenceRoot + "." + prefix + ".>" }

// TopicSubjects returns the filter subject of every producer of topic under
// prefix: prefix.topic.*
func TopicSubjects(prefix, topic string) string { return prefix + "." + topic + ".*" }

// ParseSubject returns the topic and producer of a record subject under
// prefix; ok is false for a subject the store does not write. It reads the
// native subjects (the last token is the producer, the tokens before it the
// topic) and those of streams written before (prefix.=base64url or plain
// topic token.=base64url or plain producer token).
func ParseSubject(prefix, subject string) (topic, producer string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+".")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	topic, producer = rest[:i], rest[i+1:]
	if topic, ok = legacyName(topic); !ok {
		return "", "", false
	}
	producer, ok = legacyName(producer)
	return topic, producer, ok
}

// legacyName decodes a token of the subjects written before the native
// layout: "=" and unpadded base64url for a name that was not a plain
// token. Any other token is the name itself.
func legacyName(tok string) (string, bool) {
	if tok == "" {
		return "", false
	}
	if tok[0] != '=' {
		return tok, true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[1:])
	if err != nil {
		return "", false
	}
	return string(b), true
}
