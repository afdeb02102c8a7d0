// Package endpoints is the list of broker addresses a producer's dialer
// connects to: several gateways of one store, or a name that resolves to
// several addresses. transport/tcp and transport/stdnet share it.
//
// Every Dial starts one address further along the list than the previous
// Dial of the same List (the first at a random one), and tries the others in
// turn when one does not connect. So the producers of one dialer, and of
// several processes, spread over the gateways; a producer whose connection
// was lost starts its reconnect at the next gateway; and a gateway that is
// down costs one failed connect, not a failed Dial.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

// ErrNoAddress is returned by Parse for a list without an address.
var ErrNoAddress = errors.New("no broker address")

// List is a list of broker addresses. Its methods are safe for concurrent
// use.
type List struct {
	entries []entry
	next    atomic.Uint64 // where the next Dial starts, modulo the targets
	// Lookup resolves a host name to its addresses (default
	// net.DefaultResolver.LookupHost). Tests replace it before the first
	// Dial.
	Lookup func(ctx context.Context, host string) ([]string, error)
}

type entry struct {
	host, port string
	ip         bool // host is an IP literal: nothing to resolve
}

// Target is one address a Dial tries.
type Target struct {
	Addr string // IP:port to connect to
	Host string // the host as given, for TLS's server name
}

// Parse reads "host:port[,host:port...]" (spaces around commas allowed).
// Every entry needs a host and a port; a host may be a name that resolves
// to several addresses.
func Parse(s string) (*List, error) {
	l := &List{Lookup: net.DefaultResolver.LookupHost}
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", a, err)
		}
		if host == "" || port == "" {
			return nil, fmt.Errorf("address %q: want host:port", a)
		}
		l.entries = append(l.entries, entry{host: host, port: port, ip: net.ParseIP(host) != nil})
	}
	if len(l.entries) == 0 {
		return nil, fmt.Errorf("%w in %q", ErrNoAddress, s)
	}
	l.next.Store(rand.Uint64())
	return l, nil
}

// Len returns the number of entries as given (before names are resolved).
func (l *List) Len() int { return len(l.entries) }

// String returns the list as Parse takes it.
func (l *List) String() string {
	s := make([]string, len(l.entries))
	for i, e := range l.entries {
		s[i] = net.JoinHostPort(e.host, e.port)
	}
	return strings.Join(s, ",")
}

// Targets returns, for the next Dial, every address of the list, names
// resolved to all their addresses, rotated to start one further than the
// previous call's. A name that does not resolve is left out, unless no
// address remains: then the lookup errors are returned.
func (l *List) Targets(ctx context.Context) ([]Target, error) {
	var (
		ts   []Target
		errs []error
	)
	for _, e := range l.entries {
		if e.ip {
			ts = append(ts, Target{Addr: net.JoinHostPort(e.host, e.port), Host: e.host})
			continue
		}
		ips, err := l.Lookup(ctx, e.host)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ip := range ips {
			ts = append(ts, Target{Addr: net.JoinHostPort(ip, e.port), Host: e.host})
		}
	}
	if len(ts) == 0 {
		if len(errs) == 1 {
			return nil, errs[0]
		}
		return nil, attempts(errs)
	}
	start := int((l.next.Add(1) - 1) % uint64(len(ts)))
	return append(ts[start:], ts[:start]...), nil
}

// minAttempt is the least time one connect attempt gets when a Dial's
// time is shared among several addresses (as the net package does).
const minAttempt = 2 * time.Second

// Dial tries the next Dial's targets in turn with dial until one connects,
// and returns its connection. Each attempt is bounded by attempt, and by a
// fair share of what is left of ctx when more addresses remain. If none
// connects it returns every attempt's error, each naming its address.
func Dial[C any](ctx context.Context, l *List, attempt time.Duration, dial func(ctx context.Context, t Target) (C, error)) (C, error) {
	var zero C
	ts, err := l.Targets(ctx)
	if err != nil {
		return zero, err
	}
	var errs []error
	for i, t := range ts {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		d := attempt
		if dl, ok := ctx.Deadline(); ok && i < len(ts)-1 {
			d = min(d, max(time.Until(dl)/time.Duration(len(ts)-i), minAttempt))
		}
		actx, cancel := context.WithTimeout(ctx, d)
		c, err := dial(actx, t)
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", t.Addr, err))
	}
	if len(errs) == 1 {
		return zero, errs[0]
	}
	return zero, attempts(errs)
}

// attempts is the errors of a Dial's attempts, on one line.
type attempts []error

func (a attempts) Error() string {
	s := make([]string, len(a))
	for i, err := range a {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (a attempts) Unwrap() []error { return a }
