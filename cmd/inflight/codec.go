package main

import (
	"fmt"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

const codecNames = "none, zstd, zstd-default, zstd-better, s2, s2-better, snappy"

var codecFlags = map[string]struct {
	codec wire.Codec
	level wire.Level
}{
	"zstd":         {wire.CodecZstd, wire.LevelFastest},
	"zstd-default": {wire.CodecZstd, wire.LevelDefault},
	"zstd-better":  {wire.CodecZstd, wire.LevelBetter},
	"s2":           {wire.CodecS2, wire.LevelDefault},
	"s2-better":    {wire.CodecS2, wire.LevelBetter},
	"snappy":       {wire.CodecSnappy, wire.LevelDefault},
}

// codecOption maps a -codec flag value to a producer option (nil: none).
func codecOption(name string) (core.Option, error) {
	if name == "none" || name == "" {
		return nil, nil
	}
	c, ok := codecFlags[name]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q (want one of: %s)", name, codecNames)
	}
	return core.Compression(c.codec, c.level), nil
}
