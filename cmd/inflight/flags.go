package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
)

// parseFlags parses args into fs. It returns the exit code to stop with, or
// -1 to go on. -h (or -help) prints the command's usage on stdout: exitOK.
// A flag that does not parse, or an argument that is not a flag, prints one
// line saying why and a pointer to -h on stderr, not the whole usage:
// exitUsage.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	usage := fs.Usage
	fs.Usage = func() {} // flag calls it on every error: printed below instead
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK
	case err != nil:
		return flagError(fs, stderr, describeFlagError(fs, err))
	case fs.NArg() > 0:
		return flagError(fs, stderr, fmt.Sprintf("unexpected argument %q (flags only; they come before any argument)", fs.Arg(0)))
	}
	fs.SetOutput(stderr)
	return -1
}

// flagError prints why the command line is wrong and where the flags are
// described.
func flagError(fs *flag.FlagSet, stderr io.Writer, why string) int {
	fmt.Fprintf(stderr, "inflight %s: %s\nsee 'inflight %s -h'\n", fs.Name(), why, fs.Name())
	return exitUsage
}

// describeFlagError rewrites the flag package's "flag provided but not
// defined: -x" as "unknown flag -x" with the flags it may be a typo of.
func describeFlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !ok {
		return msg
	}
	msg = "unknown flag -" + name
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if close := closeNames(name, names); len(close) > 0 {
		msg += " (did you mean -" + strings.Join(close, " or -") + "?)"
	}
	if name == "token" && fs.Lookup("token-file") != nil {
		msg += "; a token is read from -token-file FILE or $" + tokenEnv + ", never from the command line, which other users of the machine can see"
	}
	return msg
}

// closeNames returns the names that name may be a typo of, the closest
// by editDistance (ties all, at most three): of those that start with it
// or that it starts with (-token for -token-file), if any, else of those
// within a third of its length (at least one).
func closeNames(name string, names []string) []string {
	var near []string
	for _, n := range names {
		if len(name) >= 3 && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n) && len(n) >= 3) {
			near = append(near, n)
		}
	}
	limit := math.MaxInt - 1 // any of them
	if len(near) == 0 {
		near, limit = names, max(1, len(name)/3)
	}
	var out []string
	best := limit + 1
	for _, n := range near {
		switch d := editDistance(name, n); {
		case d < best:
			out, best = []string{n}, d
		case d == best:
			out = append(out, n)
		}
	}
	return out[:min(len(out), 3)]
}

// editDistance is the number of single-byte insertions, deletions,
// substitutions and swaps of neighbours that turn a into b (the optimal
// string alignment distance): "sreve" is one from "serve".
func editDistance(a, b string) int {
	// d[i][j]: the distance of a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// usageError reports a flag value that parsed but makes no sense.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "inflight %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	return exitUsage
}

// checkHostPorts checks a comma-separated list of host:port addresses (at
// least one) with checkHostPort.
func checkHostPorts(s string) error {
	n := 0
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no address in %q", s)
	}
	return nil
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
