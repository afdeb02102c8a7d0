package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProduceReportsDialErrorQuickly: against a port nobody listens on, the
// cause shows within a second, repeats are summarized, and the report says
// that no latency exists rather than print zeros. Against something that is
// not a broker (an HTTP server), the handshake failure shows.
func TestProduceReportsDialErrorQuickly(t *testing.T) {
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	defer httpSrv.Close()
	for _, tc := range []struct {
		name, addr string
		cause      string
		within     time.Duration
	}{
		{"refused", "127.0.0.1:1", `connection: dial 127\.0\.0\.1:1: connection refused\n`, time.Second},
		{"not a broker", strings.TrimPrefix(httpSrv.URL, "http://"), `connection: handshake failed: [^\n]*\n`, handshakeTimeout + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := newWatchWriter()
			start := time.Now()
			wait := runAsync(t, context.Background(), out, io.Discard,
				"produce", "-addr="+tc.addr, "-n=5", "-timeout=2500ms", "-progress=1m")
			out.wait(t, regexp.MustCompile(tc.cause), tc.within)
			assert.Less(t, time.Since(start), tc.within, "the cause shows quickly")
			assert.Equal(t, exitFailure, wait())
			if tc.name == "refused" { // dials fail fast enough to repeat
				assert.Regexp(t, tc.cause[:len(tc.cause)-2]+` \(x\d+ in [^)]+\)\n`, out.String(), "repeats summarized")
			}
			assert.Contains(t, out.String(), "latency: no message succeeded")
			assert.NotContains(t, out.String(), "p50 0")
		})
	}
}
