package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// progress shows one status line: rewritten in place on a terminal, printed
// as plain periodic lines otherwise (logs, pipes, CI).
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) show(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// end finishes the in-place line so that what follows starts on its own.
func (p *progress) end() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// count formats n with thousands separators.
func count[T ~int | ~int64 | ~uint64](n T) string {
	s := strconv.FormatUint(uint64(max(n, 0)), 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// rate formats a per-second rate compactly.
func rate(perSec float64) string {
	switch {
	case perSec >= 1e6:
		return fmt.Sprintf("%.2fM/s", perSec/1e6)
	case perSec >= 1e3:
		return fmt.Sprintf("%.1fk/s", perSec/1e3)
	}
	return fmt.Sprintf("%.0f/s", perSec)
}
