package main

import (
	"fmt"

	"github.com/inflightmq/inflight/core"
)

const codecNames = "none"

// codecOption maps a -codec flag value to a producer option (nil: none).
func codecOption(name string) (core.Option, error) {
	switch name {
	case "none", "":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown codec %q (want one of: %s)", name, codecNames)
}
