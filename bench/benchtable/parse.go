package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark line.
type result struct {
	name    string
	iters   int64
	metrics []metric
}

type metric struct {
	unit  string
	value float64
}

// parse returns the benchmark lines of go test -bench output:
//
//	BenchmarkName/sub-2   	 1000000	 242.2 ns/op	 412.92 MB/s	 4073913 msgs/s
//
// A line counts if its first field starts with "Benchmark", its second is an
// iteration count and the rest are value-unit pairs.
func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if res, ok := parseLine(sc.Text()); ok {
			out = append(out, res)
		}
	}
	return out, sc.Err()
}

func parseLine(line string) (result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return result{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || iters <= 0 {
		return result{}, false
	}
	res := result{name: f[0], iters: iters}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return result{}, false
		}
		res.metrics = append(res.metrics, metric{unit: f[i+1], value: v})
	}
	return res, true
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// stripProcs removes the -GOMAXPROCS suffix go test appends to every name
// when GOMAXPROCS is not 1. It does so only when every name ends in the
// same -N, so that a name of its own ending in digits (x/size-64 under
// GOMAXPROCS=1) survives.
func stripProcs(rs []result) []result {
	suffix := ""
	for i, r := range rs {
		m := procsSuffix.FindString(r.name)
		if m == "" || (i > 0 && m != suffix) {
			return rs
		}
		suffix = m
	}
	out := make([]result, len(rs))
	for i, r := range rs {
		r.name = strings.TrimSuffix(r.name, suffix)
		out[i] = r
	}
	return out
}

// row is one benchmark after merging repeated runs.
type row struct {
	name   string
	runs   int
	values map[string]float64 // median per unit
	units  []string           // in order of first appearance
}

// merge groups results by name, in order of first appearance, and takes the
// median of each metric over the runs that reported it.
func merge(rs []result) []row {
	var rows []row
	index := map[string]int{}
	samples := map[string]map[string][]float64{}
	for _, r := range rs {
		i, ok := index[r.name]
		if !ok {
			i = len(rows)
			index[r.name] = i
			rows = append(rows, row{name: r.name, values: map[string]float64{}})
			samples[r.name] = map[string][]float64{}
		}
		rows[i].runs++
		for _, m := range r.metrics {
			if _, seen := samples[r.name][m.unit]; !seen {
				rows[i].units = append(rows[i].units, m.unit)
			}
			samples[r.name][m.unit] = append(samples[r.name][m.unit], m.value)
		}
	}
	for i := range rows {
		for unit, vs := range samples[rows[i].name] {
			rows[i].values[unit] = median(vs)
		}
	}
	return rows
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
