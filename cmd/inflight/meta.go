package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

// headerFlags is a repeatable -header k=v flag: the headers every message
// carries, in flag order.
type headerFlags []core.Header

func (h *headerFlags) String() string {
	parts := make([]string, len(*h))
	for i, x := range *h {
		parts[i] = x.Key + "=" + string(x.Value)
	}
	return strings.Join(parts, ",")
}

func (h *headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	*h = append(*h, core.Header{Key: k, Value: []byte(v)})
	if _, err := wire.CheckMeta(nil, *h, time.Time{}); err != nil {
		return err
	}
	return nil
}

// keyFlag is -key: "" for none, "random" for 16 random bytes per message,
// anything else for that key on every message.
type keyFlag struct {
	fixed  []byte
	random bool
}

func (k *keyFlag) String() string {
	if k.random {
		return "random"
	}
	return string(k.fixed)
}

func (k *keyFlag) Set(s string) error {
	if len(s) > wire.MaxKeyLen {
		return fmt.Errorf("key of %d bytes, limit %d", len(s), wire.MaxKeyLen)
	}
	k.random, k.fixed = s == "random", nil
	if !k.random && s != "" {
		k.fixed = []byte(s)
	}
	return nil
}

// prepare gives message m its key buffer and the headers.
func (k *keyFlag) prepare(m *core.Message, headers []core.Header) {
	switch {
	case k.random:
		m.Key = make([]byte, 16)
	case k.fixed != nil:
		m.Key = k.fixed
	}
	if len(headers) > 0 {
		m.Headers = headers
	}
}

// next sets the key of m, which prepare set up, for the next send.
func (k *keyFlag) next(m *core.Message) {
	if k.random {
		binary.LittleEndian.PutUint64(m.Key, rand.Uint64())
		binary.LittleEndian.PutUint64(m.Key[8:], rand.Uint64())
	}
}
