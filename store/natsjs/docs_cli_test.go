package natsjs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport/mem"
)

// natscli is the nats CLI the documentation's commands are checked with:
// built from the module proxy by `go install` (its own go.mod, nothing of
// ours), once per test binary.
const natscli = "github.com/nats-io/natscli/nats@v0.5.0"

// docsCLIMark is the line above the sh block of docs/jetstream.md whose
// nats commands TestDocsNATSCLI runs.
const docsCLIMark = "<!-- run by TestDocsNATSCLI in store/natsjs: every nats line below, against a server holding the two records of Example_consume -->"

// TestDocsNATSCLI: the nats CLI commands docs/jetstream.md shows a NATS
// user run as it says, against an in-process server where a producer
// stored what Example_consume stores: each command exits 0 and prints the
// records (the subject, the payload, the headers) or what it says it
// does.
func TestDocsNATSCLI(t *testing.T) {
	cmds := docsCLICommands(t)
	bin := buildNATSCLI(t)
	c := startCluster(t, 1, natsjstest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := natsjs.Open(ctx, c.URLs()+"/INFLIGHT")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b, err := broker.New(store)
	if err != nil {
		t.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()
	p := newProducer(t, d, "svc-1")
	for _, order := range []string{"42", "43"} {
		m := &core.Message{Topic: "orders.eu", Payload: []byte(`{"order":` + order + `}`), Key: []byte("order-" + order),
			Headers: []core.Header{{Key: "src", Value: []byte("web")}}}
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)

	// What each documented command must print, by its subcommand.
	want := map[string][]string{
		"stream subjects": {"inflight.orders.eu.svc-1"},
		"stream get":      {`{"order":43}`, "Inflight-Key: order-43", "Inflight-Seq: 2", "src: web"},
		"sub":             {`{"order":42}`, `{"order":43}`, "inflight.orders.eu.svc-1", "Inflight-Seq: 2"},
		"consumer add":    {"orders-eu"},
		"consumer next":   {`{"order":42}`, `{"order":43}`},
	}
	home := t.TempDir() // no contexts of the machine's user
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_URL="+c.URLs(), "NATS_CONTEXT=")
	ran := map[string]bool{}
	for _, args := range cmds {
		sub := strings.Join(args[:min(2, len(args))], " ")
		if _, ok := want[sub]; !ok {
			sub = args[0]
		}
		t.Logf("nats %s", strings.Join(args, " "))
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(cctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		ccancel()
		if err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, w := range want[sub] {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("nats %s prints no %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		ran[sub] = true
	}
	for sub := range want {
		if !ran[sub] {
			t.Errorf("docs/jetstream.md shows no `nats %s`", sub)
		}
	}
}

// docsCLICommands returns the arguments of each nats command of the
// marked sh block of docs/jetstream.md (single-quoted words kept whole,
// comments dropped). A line that is not a nats command fails the test.
func docsCLICommands(t *testing.T) [][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "jetstream.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), docsCLIMark+"\n```sh\n")
	if !ok {
		t.Fatalf("docs/jetstream.md has no sh block under %q", docsCLIMark)
	}
	block, _, _ := strings.Cut(rest, "```\n")
	var cmds [][]string
	lines := bufio.NewScanner(strings.NewReader(block))
	for lines.Scan() {
		args, err := shellWords(lines.Text())
		if err != nil {
			t.Fatalf("docs/jetstream.md: %q: %v", lines.Text(), err)
		}
		switch {
		case len(args) == 0:
		case args[0] != "nats":
			t.Fatalf("docs/jetstream.md: %q is not a nats command", lines.Text())
		default:
			cmds = append(cmds, args[1:])
		}
	}
	return cmds
}

// shellWords splits a line as sh would for the documentation's commands:
// words separated by spaces, '...' quoting, a # word starting a comment.
func shellWords(line string) ([]string, error) {
	var words []string
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '#':
			return words, nil
		default:
			var w strings.Builder
			for i < len(line) && line[i] != ' ' && line[i] != '\t' {
				if line[i] == '\'' {
					end := strings.IndexByte(line[i+1:], '\'')
					if end < 0 {
						return nil, fmt.Errorf("unterminated quote")
					}
					w.WriteString(line[i+1 : i+1+end])
					i += end + 2
					continue
				}
				if strings.IndexByte(`"\$*?;&|<>`+"`", line[i]) >= 0 {
					return nil, fmt.Errorf("%q: only plain words and '...' here", line[i])
				}
				w.WriteByte(line[i])
				i++
			}
			words = append(words, w.String())
		}
	}
	return words, nil
}

// buildNATSCLI installs natscli into a directory of the test and returns
// the binary's path.
func buildNATSCLI(t *testing.T) string {
	t.Helper()
	gobin := t.TempDir()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building %s needs the go command: %v", natscli, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "install", natscli)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", natscli, err, out)
	}
	return filepath.Join(gobin, "nats")
}
