package natsjs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/wire"
)

// startServer starts one JetStream server on 127.0.0.1 with the options
// set changes; it stops at the test's end.
func startServer(t *testing.T, set func(o *server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: t.TempDir()}
	set(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready in 10s")
	}
	return s
}

// storeOn makes the stream and a store on nc (closed at the test's end),
// and writes and reads back a few records: fenced (fast batches) and
// unfenced (atomic batches), one with headers.
func storeOn(t *testing.T, nc *nats.Conn) *natsjs.Store {
	t.Helper()
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName}); err != nil {
		t.Fatal(err)
	}
	s, err := natsjs.New(ctx, nc, natsjs.Config{Stream: streamName, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Fence("p", 1); err != nil {
		t.Fatal(err)
	}
	recs := plainRecords(1, 2, 3)
	recs[1].Headers = []wire.Header{{Key: "b", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}
	if err := s.Append("fast", "p", 1, recs); err != nil {
		t.Fatalf("fast batch: %v", err)
	}
	if err := s.Append("atomic", "q", 0, plainRecords(1, 2)); err != nil {
		t.Fatalf("atomic batch: %v", err)
	}
	var n int
	if err := natsjs.Read(ctx, js, streamName, "inflight.>", func(string, uint64, broker.Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("%d records read back, want 5", n)
	}
	return s
}

// TestStoreConnectionCredentials: the store's own connection for writes
// logs in as nc does: a user and password in the URL, a token, an nkey,
// TLS (verified against the test's CA, after INFO or handshake first).
func TestStoreConnectionCredentials(t *testing.T) {
	t.Run("user-password-in-URL", func(t *testing.T) {
		s := startServer(t, func(o *server.Options) { o.Username, o.Password = "u", "secret" })
		storeOn(t, dial(t, fmt.Sprintf("nats://u:secret@%s", s.Addr())))
	})
	t.Run("token", func(t *testing.T) {
		s := startServer(t, func(o *server.Options) { o.Authorization = "tok" })
		storeOn(t, dial(t, "nats://"+s.Addr().String(), nats.Token("tok")))
	})
	t.Run("nkey", func(t *testing.T) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		s := startServer(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
		storeOn(t, dial(t, "nats://"+s.Addr().String(), nats.Nkey(pub, kp.Sign)))
	})
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls/handshake-first=%v", first), func(t *testing.T) {
			serverTLS, clientTLS := testTLS(t)
			s := startServer(t, func(o *server.Options) {
				o.TLSConfig, o.TLSHandshakeFirst = serverTLS, first
			})
			opts := []nats.Option{nats.Secure(clientTLS)}
			if first {
				opts = append(opts, nats.TLSHandshakeFirst())
			}
			storeOn(t, dial(t, "tls://"+s.Addr().String(), opts...))
		})
	}
	t.Run("wrong-password", func(t *testing.T) {
		// nc logged in; the store's connection cannot (the server's users
		// changed): the write fails, naming the server's refusal.
		s := startServer(t, func(o *server.Options) { o.Username, o.Password = "u", "secret" })
		nc := dial(t, "nats://"+s.Addr().String(), nats.UserInfo("u", "secret"))
		nc.Opts.Password = "wrong" // what the store's connection will send
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName}); err != nil {
			t.Fatal(err)
		}
		st, err := natsjs.New(ctx, nc, natsjs.Config{Stream: streamName})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		err = st.Append("t", "p", 0, plainRecords(1))
		if !errors.Is(err, natsjs.ErrPublish) || !strings.Contains(err.Error(), "Authorization") {
			t.Errorf("Append: %v, want ErrPublish naming the server's refusal", err)
		}
	})
}

func dial(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := natsjs.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testTLS returns a server TLS configuration with a certificate for
// 127.0.0.1 signed by a CA made for the test, and a client configuration
// that trusts only that CA.
func testTLS(t *testing.T) (serverCfg, clientCfg *tls.Config) {
	t.Helper()
	ca, err := testcert.NewCA("natsjs test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Server()
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool}
}

// TestStoreConnectionAnswersPings: the server pings the store's own
// connection (every 20 ms here, two unanswered and it would close it); it
// answers, so the connection it first dialed still writes after many
// intervals.
func TestStoreConnectionAnswersPings(t *testing.T) {
	s := startServer(t, func(o *server.Options) { o.PingInterval, o.MaxPingsOut = 20*time.Millisecond, 2 })
	st := storeOn(t, dial(t, "nats://"+s.Addr().String()))
	if n := natsjs.PubDials(st); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	time.Sleep(300 * time.Millisecond) // fifteen ping intervals: what is tested is that time passes
	if err := st.Append("fast", "p", 1, plainRecords(4)); err != nil {
		t.Fatal(err)
	}
	if n := natsjs.PubDials(st); n != 1 {
		t.Errorf("%d dials after 15 ping intervals: the server dropped the store's connection", n)
	}
}

// TestStoreConnectionRefusedPublish: a user who may not publish on the
// records' subjects gets the server's words at once (the server answers
// such a publish with -ERR on the store's connection, never with a
// reply), not a timeout.
func TestStoreConnectionRefusedPublish(t *testing.T) {
	s := startServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Deny: []string{"inflight.>"}}}}}
	})
	nc := dial(t, "nats://"+s.Addr().String(), nats.UserInfo("u", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName}); err != nil {
		t.Fatal(err)
	}
	st, err := natsjs.New(ctx, nc, natsjs.Config{Stream: streamName, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Fence("p", 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = st.Append("t", "p", 1, plainRecords(1, 2))
	if !errors.Is(err, natsjs.ErrPublish) || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Errorf("Append: %v, want ErrPublish naming the permissions violation", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the refusal took %v (the store's Timeout is a minute)", d)
	}
}

// TestNewRefusesWebsocket: the store's own connection speaks nats:// and
// tls:// only; New says so for a websocket connection.
func TestNewRefusesWebsocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := startServer(t, func(o *server.Options) {
		o.Websocket.Host, o.Websocket.Port, o.Websocket.NoTLS = "127.0.0.1", port, true
	})
	js, _ := jetstream.New(dial(t, "nats://"+s.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName}); err != nil {
		t.Fatal(err)
	}
	ws := dial(t, fmt.Sprintf("ws://127.0.0.1:%d", port))
	if _, err := natsjs.New(ctx, ws, natsjs.Config{Stream: streamName}); !errors.Is(err, natsjs.ErrInvalidConfig) || !strings.Contains(err.Error(), "ws://") {
		t.Errorf("New on a websocket connection: %v, want ErrInvalidConfig naming ws://", err)
	}
}
