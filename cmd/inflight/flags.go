package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
)

// parseFlags parses args into fs. It returns the exit code to stop with, or
// -1 to go on: exitOK after -h, exitUsage for a bad flag (flag prints why).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "inflight %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	return -1
}

// usageError reports a flag value that parsed but makes no sense.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "inflight %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	return exitUsage
}

// checkHostPort reports whether s is a host:port address that can be
// listened on or dialled: a number for the port, 0 to 65535.
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %s: port must be a number from 0 to 65535", s)
	}
	return nil
}
