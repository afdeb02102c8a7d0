package natsjs

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Open connects to NATS, creates or checks the stream and returns a Store
// that owns its connection (Close closes it), all from one URL, the form
// `inflight serve -store` takes:
//
//	nats://[user:pass@]host:port[,host:port...]/STREAM[?option=value&...]
//
// (tls:// instead of nats:// requires TLS). Options, all optional:
//
//	replicas=N               stream replicas (default 1)
//	storage=file|memory      stream storage (default file)
//	max_age=DURATION         stream MaxAge, e.g. 720h (default: forever)
//	max_bytes=N              stream MaxBytes (default: no limit)
//	layout=native|packed     record layout (default native)
//	read=leader|direct       where tails are read (default leader; direct
//	                         also makes the stream AllowDirect)
//	prefix=P                 subject prefix (default inflight)
//	timeout=DURATION         publish and read timeout (default 5s)
//	create=false             only check the stream, never create it
//	creds=FILE               NATS credentials file
//	tls_ca=FILE              CA certificates to verify the servers
//	tls_cert=FILE&tls_key=FILE   client certificate
//
// Errors: ErrInvalidConfig for a URL or option it cannot read, then those
// of Connect, EnsureStream and New. As EnsureStream, it returns an error the
// server gives for good at once and retries the others until ctx ends.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	servers, cfg, sc, create, nopts, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	nc, err := Connect(servers, nopts...)
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: connect %s: %w", redact(servers), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("inflight: natsjs: %w", err)
	}
	if create {
		_, err = EnsureStream(ctx, js, sc)
	} else if err = sc.setDefaults(); err == nil {
		var s jetstream.Stream
		if s, err = lookupStream(ctx, js, sc.Name); err == nil {
			err = checkStream(s.CachedInfo().Config, sc)
		}
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := New(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.ownConn = true
	return s, nil
}

// Dial connects to NATS as Open does and returns the connection with the
// store configuration the URL gives (stream, prefix, layout, ...), without
// touching the stream: for readers of a stream that gateways write. The
// caller closes the connection.
func Dial(rawURL string) (*nats.Conn, Config, error) {
	servers, cfg, _, _, nopts, err := parseURL(rawURL)
	if err != nil {
		return nil, Config{}, err
	}
	nc, err := Connect(servers, nopts...)
	if err != nil {
		return nil, Config{}, fmt.Errorf("inflight: natsjs: connect %s: %w", redact(servers), err)
	}
	if err := cfg.setDefaults(); err != nil {
		nc.Close()
		return nil, Config{}, err
	}
	return nc, cfg, nil
}

// Close ends the store's subscription for batch replies and its own
// connection for writes, and closes the NATS connection if Open made it (a
// Store from New leaves that connection to the caller). Call it after the
// last Append returned; calling it again does nothing.
func (s *Store) Close() {
	s.replies.close()
	s.pub.close()
	if s.ownConn {
		s.nc.Close()
	}
}

func parseURL(raw string) (servers string, cfg Config, sc StreamConfig, create bool, nopts []nats.Option, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: store URL %s: %s", ErrInvalidConfig, redact(raw), fmt.Sprintf(format, a...))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme != "nats" && scheme != "tls" {
		return "", cfg, sc, false, nil, bad("want nats://host:port/STREAM or tls://...")
	}
	hosts, pathQuery, _ := strings.Cut(rest, "/")
	stream, rawQuery, _ := strings.Cut(pathQuery, "?")
	if hosts == "" || stream == "" {
		return "", cfg, sc, false, nil, bad("want nats://host:port/STREAM")
	}
	if stream, err = url.PathUnescape(stream); err != nil {
		return "", cfg, sc, false, nil, bad("stream name: %v", err)
	}
	var list []string
	for h := range strings.SplitSeq(hosts, ",") {
		list = append(list, scheme+"://"+h)
	}
	servers = strings.Join(list, ",")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", cfg, sc, false, nil, bad("%v", err)
	}
	cfg.Stream, sc.Name, create = stream, stream, true
	var certFile, keyFile string
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "replicas":
			sc.Replicas, err = strconv.Atoi(v)
		case "storage":
			switch v {
			case "file":
				sc.Storage = jetstream.FileStorage
			case "memory":
				sc.Storage = jetstream.MemoryStorage
			default:
				err = fmt.Errorf("not file or memory")
			}
		case "max_age":
			sc.MaxAge, err = time.ParseDuration(v)
		case "max_bytes":
			sc.MaxBytes, err = strconv.ParseInt(v, 10, 64)
		case "layout":
			switch v {
			case "native":
				cfg.Layout = LayoutNative
			case "packed":
				cfg.Layout = LayoutPacked
			default:
				err = fmt.Errorf("not native or packed")
			}
		case "read":
			switch v {
			case "leader":
				cfg.Read = ReadLeader
			case "direct":
				cfg.Read, sc.AllowDirect = ReadDirect, true
			default:
				err = fmt.Errorf("not leader or direct")
			}
		case "prefix":
			cfg.Prefix, sc.Prefix = v, v
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(v)
		case "create":
			create, err = strconv.ParseBool(v)
		case "creds":
			nopts = append(nopts, nats.UserCredentials(v))
		case "tls_ca":
			nopts = append(nopts, nats.RootCAs(v))
		case "tls_cert":
			certFile = v
		case "tls_key":
			keyFile = v
		default:
			err = fmt.Errorf("unknown option")
		}
		if err != nil {
			return "", cfg, sc, false, nil, bad("%s=%s: %v", k, v, err)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return "", cfg, sc, false, nil, bad("tls_cert and tls_key go together")
	}
	if certFile != "" {
		nopts = append(nopts, nats.ClientCert(certFile, keyFile))
	}
	return servers, cfg, sc, create, nopts, nil
}

// redact hides passwords in a URL for error messages.
func redact(s string) string {
	out := []byte(s)
	for i := 0; i < len(out); i++ {
		if out[i] != '@' {
			continue
		}
		// Blank from the ':' after the last "//" or ',' before '@'.
		start := strings.LastIndexAny(string(out[:i]), "/,")
		if c := strings.IndexByte(string(out[start+1:i]), ':'); c >= 0 {
			for j := start + 1 + c + 1; j < i; j++ {
				out[j] = '*'
			}
		}
	}
	return string(out)
}
