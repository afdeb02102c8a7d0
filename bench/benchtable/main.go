// Command benchtable reads `go test -bench` output and prints a Markdown
// table of it.
//
//	(cd bench/peers && go test -run=NONE -bench=Peers .) | tee peers.txt | go run ./bench/benchtable
//	go run ./bench/benchtable peers.txt other.txt
//
// Every benchmark line (name, iterations, then value-unit pairs) becomes a
// row; a benchmark that appears more than once (-count) is reduced to the
// median of each metric. Output of BenchmarkPeers (names
// BenchmarkPeers/<system>/payload=<bytes>) gets the comparison table:
// system, payload, msgs/s, p50, p99, allocs/op and the msgs/s of the
// reference system (-ref, default inflight-tcp) at the same payload divided
// by the row's. Any other output gets one column per unit, in the order the
// units first appear. Lines that are not benchmark results are ignored.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	mode := flag.String("mode", "auto", "table layout: auto, peers or generic")
	ref := flag.String("ref", "inflight-tcp", "peers layout: the system the ratio column compares to")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: benchtable [-mode auto|peers|generic] [-ref system] [file ...]\n"+
			"Reads go test -bench output (stdin without files) and prints a Markdown table.\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(os.Stdout, os.Stdin, flag.Args(), *mode, *ref); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, stdin io.Reader, files []string, mode, ref string) error {
	var results []result
	if len(files) == 0 {
		rs, err := parse(stdin)
		if err != nil {
			return err
		}
		results = rs
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, err := parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, rs...)
	}
	rows := merge(stripProcs(results))
	if len(rows) == 0 {
		return fmt.Errorf("no benchmark results in the input")
	}
	switch mode {
	case "auto":
		if isPeers(rows) {
			return peersTable(w, rows, ref)
		}
		return genericTable(w, rows)
	case "peers":
		if !isPeers(rows) {
			return fmt.Errorf("-mode peers: not every benchmark is named BenchmarkPeers/<system>/payload=<bytes>")
		}
		return peersTable(w, rows, ref)
	case "generic":
		return genericTable(w, rows)
	}
	return fmt.Errorf("-mode %q: want auto, peers or generic", mode)
}
