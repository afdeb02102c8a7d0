package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var peersName = regexp.MustCompile(`^BenchmarkPeers/([^/]+)/payload=(\d+)$`)

func isPeers(rows []row) bool {
	for _, r := range rows {
		if !peersName.MatchString(r.name) {
			return false
		}
	}
	return true
}

// peersTable prints one row per system and payload, in input order.
func peersTable(w io.Writer, rows []row, ref string) error {
	refRate := map[string]float64{} // payload -> msgs/s of the reference
	for _, r := range rows {
		m := peersName.FindStringSubmatch(r.name)
		if m[1] == ref {
			refRate[m[2]] = r.values["msgs/s"]
		}
	}
	if len(refRate) == 0 {
		return fmt.Errorf("-ref %q: no such system in the input", ref)
	}
	t := table{header: []string{"system", "payload", "msgs/s", "p50", "p99", "allocs/op", ref + " / this"},
		right: []bool{false, true, true, true, true, true, true}}
	for _, r := range rows {
		m := peersName.FindStringSubmatch(r.name)
		size, _ := strconv.Atoi(m[2])
		ratio := "–" // the reference did not run at this size
		if rate, ok := r.values["msgs/s"]; ok && rate > 0 && refRate[m[2]] > 0 {
			ratio = fmt.Sprintf("%.2f×", refRate[m[2]]/rate)
		}
		t.add(m[1], bytesLabel(size), value(r, "msgs/s", number),
			value(r, "p50-µs", micros), value(r, "p99-µs", micros),
			value(r, "allocs/op", number), ratio)
	}
	return t.write(w)
}

// genericTable prints one row per benchmark and one column per unit.
func genericTable(w io.Writer, rows []row) error {
	var units []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, u := range r.units {
			if !seen[u] {
				seen[u] = true
				units = append(units, u)
			}
		}
	}
	t := table{header: append([]string{"benchmark"}, units...), right: []bool{false}}
	for range units {
		t.right = append(t.right, true)
	}
	for _, r := range rows {
		cells := []string{strings.TrimPrefix(r.name, "Benchmark")}
		for _, u := range units {
			cells = append(cells, value(r, u, number))
		}
		t.add(cells...)
	}
	return t.write(w)
}

func value(r row, unit string, format func(float64) string) string {
	v, ok := r.values[unit]
	if !ok {
		return ""
	}
	return format(v)
}

// number prints whole and large values as grouped integers and the others
// with four significant digits: 4,073,913 and 30 and 242.2 and 0.3125.
func number(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000 || (v == math.Trunc(v) && a < 1<<53):
		return group(int64(math.Round(v)))
	case a == 0:
		return "0"
	default:
		return strconv.FormatFloat(v, 'f', max(0, 3-int(math.Floor(math.Log10(a)))), 64)
	}
}

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// micros prints a duration given in µs with its unit: 85.2 µs, 2.83 ms.
func micros(us float64) string {
	switch {
	case us >= 1e6:
		return strconv.FormatFloat(us/1e6, 'f', 2, 64) + " s"
	case us >= 1000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + " ms"
	case us >= 100:
		return strconv.FormatFloat(us, 'f', 0, 64) + " µs"
	default:
		return strconv.FormatFloat(us, 'f', 1, 64) + " µs"
	}
}

func bytesLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// table is a Markdown table with padded columns.
type table struct {
	header []string
	right  []bool // right-aligned columns
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	width := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(escape(c))), 3)
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			c = escape(c)
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if t.right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		return b.String() + "\n"
	}
	var b strings.Builder
	b.WriteString(line(t.header))
	b.WriteString("|")
	for i := range t.header {
		if t.right[i] {
			b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
