package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// progress shows one status line: rewritten in place on a terminal, printed
// as plain periodic lines otherwise (logs, pipes, CI). Notes (connection
// trouble) may come from another goroutine: they go on their own line above
// the status line. Safe for concurrent use.
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	last string // the status line on screen (tty only)
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

// isTerminal reports whether w is a terminal (not a file, pipe or
// /dev/null, which are character devices too).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *progress) show(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.last = line
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// note prints line on its own, keeping the status line below it.
func (p *progress) note(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n%s", line, p.last)
		return
	}
	fmt.Fprintln(p.w, line)
}

// end finishes the in-place line so that what follows starts on its own.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
		p.last = ""
	}
}
