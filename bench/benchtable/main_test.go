package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const peersOut = `goos: linux
goarch: amd64
pkg: github.com/inflightmq/inflight/bench/peers
cpu: Oxide Virtual Turin-like Processor
BenchmarkPeers/inflight-tcp/payload=100-2         	 1000000	       242.2 ns/op	 412.92 MB/s	   4000000 msgs/s	      4882 p50-µs	     27132 p99-µs	     27656 p999-µs	      10 B/op	       0 allocs/op
BenchmarkPeers/inflight-tcp/payload=100-2         	 1000000	       242.2 ns/op	 412.92 MB/s	   4200000 msgs/s	      4882 p50-µs	     27132 p99-µs	     27656 p999-µs	      10 B/op	       0 allocs/op
BenchmarkPeers/inflight-tcp/payload=100-2         	 1000000	       242.2 ns/op	 412.92 MB/s	   9000000 msgs/s	      4882 p50-µs	     27132 p99-µs	     27656 p999-µs	      10 B/op	       0 allocs/op
BenchmarkPeers/nats-js/payload=100-2              	  200000	      5446 ns/op	  18.36 MB/s	    200000 msgs/s	     85.25 p50-µs	     57410 p99-µs	     70779 p999-µs	    1974 B/op	      30 allocs/op
BenchmarkPeers/nats-js/payload=1024-2             	  200000	      5446 ns/op	  18.36 MB/s	    100000 msgs/s	     155.25 p50-µs	     1574 p99-µs	     70779 p999-µs	    1974 B/op	      30 allocs/op
PASS
ok  	github.com/inflightmq/inflight/bench/peers	1.631s
`

func TestPeersTable(t *testing.T) {
	var out strings.Builder
	if err := run(&out, strings.NewReader(peersOut), nil, "auto", "inflight-tcp"); err != nil {
		t.Fatal(err)
	}
	want := `| system       | payload |    msgs/s |     p50 |      p99 | allocs/op | inflight-tcp / this |
| ------------ | ------: | --------: | ------: | -------: | --------: | ------------------: |
| inflight-tcp |   100 B | 4,200,000 | 4.88 ms | 27.13 ms |         0 |               1.00× |
| nats-js      |   100 B |   200,000 | 85.2 µs | 57.41 ms |        30 |              21.00× |
| nats-js      |   1 KiB |   100,000 |  155 µs |  1.57 ms |        30 |                   – |
`
	// The three inflight-tcp runs merge into their median (4.2M msgs/s).
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGenericTable(t *testing.T) {
	in := `BenchmarkSendAsync/mem/payload=100-2   	 5000000	       132.6 ns/op	 754.42 MB/s	   7388182 msgs/s	 1.000 ratio	 512.5 msgs/batch	       7 B/op	       0 allocs/op
BenchmarkCodecs/zstd/batch=256/payload=1024-2   	  300000	      3012 ns/op	 340.0 MB/s	    332005 msgs/s	 3.214 ratio	       256.0 msgs/batch	      64 B/op	       1 allocs/op
BenchmarkRing/spsc-2   	 90000000	        11.31 ns/op
garbage line
BenchmarkBroken-2 	 12 	 1.5 ns/op	 7
`
	var out strings.Builder
	if err := run(&out, strings.NewReader(in), nil, "auto", "inflight-tcp"); err != nil {
		t.Fatal(err)
	}
	want := `| benchmark                          | ns/op |  MB/s |    msgs/s | ratio | msgs/batch | B/op | allocs/op |
| ---------------------------------- | ----: | ----: | --------: | ----: | ---------: | ---: | --------: |
| SendAsync/mem/payload=100          | 132.6 | 754.4 | 7,388,182 |     1 |      512.5 |    7 |         0 |
| Codecs/zstd/batch=256/payload=1024 | 3,012 |   340 |   332,005 | 3.214 |        256 |   64 |         1 |
| Ring/spsc                          | 11.31 |       |           |       |            |      |           |
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestStripProcs(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{[]string{"BenchmarkA/x-2", "BenchmarkB-2"}, []string{"BenchmarkA/x", "BenchmarkB"}},
		{[]string{"BenchmarkA/size-64", "BenchmarkB"}, []string{"BenchmarkA/size-64", "BenchmarkB"}},
		{[]string{"BenchmarkA/size-64", "BenchmarkB-2"}, []string{"BenchmarkA/size-64", "BenchmarkB-2"}},
	} {
		var rs []result
		for _, n := range tc.names {
			rs = append(rs, result{name: n})
		}
		for i, r := range stripProcs(rs) {
			if r.name != tc.want[i] {
				t.Errorf("%v: got %q, want %q", tc.names, r.name, tc.want[i])
			}
		}
	}
}

func TestNoResults(t *testing.T) {
	if err := run(&strings.Builder{}, strings.NewReader("PASS\n"), nil, "auto", "x"); err == nil {
		t.Error("no error for input without results")
	}
	if err := run(&strings.Builder{}, strings.NewReader(peersOut), nil, "bogus", "x"); err == nil {
		t.Error("no error for a bad -mode")
	}
	err := run(&strings.Builder{}, strings.NewReader(peersOut), nil, "peers", "nats")
	if err == nil || !strings.Contains(err.Error(), `"nats"`) {
		t.Errorf("an unknown -ref gave %v, want an error naming it", err)
	}
}
