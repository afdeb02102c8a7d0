package endpoints

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	l, err := Parse(" a.example:1 ,10.0.0.2:2,[::1]:3, ")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), "a.example:1,10.0.0.2:2,[::1]:3"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if l.Len() != 3 {
		t.Fatalf("Len() = %d", l.Len())
	}
	for _, bad := range []string{"", " , ", "no-port", "host:", ":7070", "a:1,b"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := Parse(","); !errors.Is(err, ErrNoAddress) {
		t.Errorf("Parse(\",\") = %v, want ErrNoAddress", err)
	}
}

// fakeLookup resolves names from a table.
func fakeLookup(table map[string][]string) func(context.Context, string) ([]string, error) {
	return func(_ context.Context, host string) ([]string, error) {
		if ips, ok := table[host]; ok {
			return ips, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
}

func addrs(ts []Target) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.Addr + "(" + t.Host + ")"
	}
	return strings.Join(s, " ")
}

// TestTargetsRotateAndResolve: names expand to all their addresses, and
// each call starts one further along, so that dials spread over them all.
func TestTargetsRotateAndResolve(t *testing.T) {
	l, err := Parse("gw.example:7070,10.0.0.9:7071,gone.example:1")
	if err != nil {
		t.Fatal(err)
	}
	l.Lookup = fakeLookup(map[string][]string{"gw.example": {"10.0.0.1", "10.0.0.2"}})
	l.next.Store(0)
	want := []string{
		"10.0.0.1:7070(gw.example) 10.0.0.2:7070(gw.example) 10.0.0.9:7071(10.0.0.9)",
		"10.0.0.2:7070(gw.example) 10.0.0.9:7071(10.0.0.9) 10.0.0.1:7070(gw.example)",
		"10.0.0.9:7071(10.0.0.9) 10.0.0.1:7070(gw.example) 10.0.0.2:7070(gw.example)",
		"10.0.0.1:7070(gw.example) 10.0.0.2:7070(gw.example) 10.0.0.9:7071(10.0.0.9)",
	}
	for i, w := range want {
		ts, err := l.Targets(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := addrs(ts); got != w {
			t.Fatalf("call %d: %s, want %s", i, got, w)
		}
	}

	// Nothing resolves: the lookup's error.
	l, _ = Parse("gone.example:1")
	l.Lookup = fakeLookup(nil)
	if _, err := l.Targets(context.Background()); err == nil || !strings.Contains(err.Error(), "no such host gone.example") {
		t.Fatalf("Targets() = %v", err)
	}
}

// TestDialFailsOver: a target that does not connect costs one attempt; the
// next one is tried; when none connects, every attempt's error is named.
func TestDialFailsOver(t *testing.T) {
	l, _ := Parse("10.0.0.1:1,10.0.0.2:2,10.0.0.3:3")
	l.next.Store(0)
	down := map[string]bool{"10.0.0.1:1": true, "10.0.0.2:2": true}
	var tried []string
	dial := func(_ context.Context, tg Target) (string, error) {
		tried = append(tried, tg.Addr)
		if down[tg.Addr] {
			return "", errors.New("connection refused")
		}
		return "conn to " + tg.Addr, nil
	}
	c, err := Dial(context.Background(), l, time.Second, dial)
	if err != nil || c != "conn to 10.0.0.3:3" {
		t.Fatalf("Dial = %q, %v", c, err)
	}
	if got := strings.Join(tried, " "); got != "10.0.0.1:1 10.0.0.2:2 10.0.0.3:3" {
		t.Fatalf("tried %s", got)
	}

	down["10.0.0.3:3"] = true
	_, err = Dial(context.Background(), l, time.Second, dial)
	if err == nil {
		t.Fatal("Dial with every target down succeeded")
	}
	for _, a := range []string{"10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"} {
		if !strings.Contains(err.Error(), a+": connection refused") {
			t.Errorf("error %q does not name %s", err, a)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
}

// TestDialSharesTheDeadline: with several targets left, an attempt gets a
// fair share of the context's time (at least minAttempt), not all of it.
func TestDialSharesTheDeadline(t *testing.T) {
	l, _ := Parse("10.0.0.1:1,10.0.0.2:2,10.0.0.3:3")
	l.next.Store(0)
	var budgets []time.Duration
	dial := func(ctx context.Context, _ Target) (int, error) {
		dl, _ := ctx.Deadline()
		budgets = append(budgets, time.Until(dl))
		return 0, errors.New("timeout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = Dial(ctx, l, time.Minute, dial)
	if len(budgets) != 3 {
		t.Fatalf("%d attempts", len(budgets))
	}
	if b := budgets[0]; b > 11*time.Second || b < 9*time.Second {
		t.Errorf("first attempt got %v of 30s for 3 targets", b)
	}
	if b := budgets[2]; b < 25*time.Second {
		t.Errorf("the last attempt got %v, want what is left", b)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	budgets = nil
	_, _ = Dial(short, l, 500*time.Millisecond, dial)
	for i, b := range budgets {
		if b > 500*time.Millisecond {
			t.Errorf("attempt %d got %v, over the attempt bound", i, b)
		}
	}
}
