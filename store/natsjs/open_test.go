package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestOpen: one URL connects, creates or checks the stream and makes a
// store; a URL it cannot read fails with ErrInvalidConfig and hides the
// password.
func TestOpen(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hosts := strings.ReplaceAll(c.URLs(), "nats://", "")
	for _, q := range []string{"", "?layout=packed&storage=memory&read=direct&prefix=x.y&timeout=3s&max_age=1h&max_bytes=100000000"} {
		stream := "OPEN" + map[bool]string{true: "A", false: "B"}[q == ""]
		s, err := natsjs.Open(ctx, "nats://"+hosts+"/"+stream+q)
		if err != nil {
			t.Fatalf("Open %q: %v", q, err)
		}
		if err := s.Append("t", "p", 0, plainRecords(1, 2, 3)); err != nil {
			t.Fatal(err)
		}
		if last, err := lastSeq(s.State("t", "p")); err != nil || last != 3 {
			t.Fatalf("LastSeq = %d, %v", last, err)
		}
		s.Close()
		// Opened again: the stream exists and fits.
		s, err = natsjs.Open(ctx, "nats://"+hosts+"/"+stream+q)
		if err != nil {
			t.Fatalf("Open again %q: %v", q, err)
		}
		s.Close()
	}
	s, err := natsjs.Open(ctx, "nats://"+hosts+"/OPENA?create=false")
	if err != nil {
		t.Errorf("Open with create=false of a fitting stream: %v", err)
	} else {
		s.Close()
	}
	if _, err := natsjs.Open(ctx, "nats://"+hosts+"/MISSING?create=false"); err == nil {
		t.Error("Open with create=false of a missing stream succeeded")
	}
	if _, err := natsjs.Open(ctx, "nats://"+hosts+"/OPENA?replicas=3"); !errors.Is(err, natsjs.ErrStreamMismatch) {
		t.Errorf("Open with other replicas: %v, want ErrStreamMismatch", err)
	}
	nc, cfg, err := natsjs.Dial("nats://" + hosts + "/OPENB?prefix=x.y")
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if cfg.Stream != "OPENB" || cfg.Prefix != "x.y" {
		t.Errorf("Dial config %+v", cfg)
	}
	for _, u := range []string{
		"http://h:1/S", "nats://h:1", "nats:///S", "nats://h:1/S?replicas=x", "nats://h:1/S?layout=fancy",
		"nats://h:1/S?storage=disk", "nats://h:1/S?nope=1", "nats://h:1/S?tls_cert=a", "nats://u:secret@h:1/S?read=x",
	} {
		_, err := natsjs.Open(ctx, u)
		if !errors.Is(err, natsjs.ErrInvalidConfig) {
			t.Errorf("Open(%q): %v, want ErrInvalidConfig", u, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", u, err)
		}
	}
}
