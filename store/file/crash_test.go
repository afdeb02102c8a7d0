package file

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
)

var crashStatesFlag = flag.Int("crash.states", 300,
	"TestCrashStatesRecover: how many crash states to open, spread over the workload (0: all of them); above 300 the workload grows too")

// crashAck is what the workload was told is stored: a record whose Append
// returned nil (or, under FsyncNone, that a later Close fsynced), or a
// fence.
type crashAck struct {
	step            int // log length when it was acknowledged
	topic, producer string
	seq, epoch      uint64 // epoch: a fence (seq 0)
	payload         string
	ino             int   // the file that held it then
	off             int64 // where its payload was in that file
}

// crashWorkload drives a Store through recFS and notes what it was told
// is stored.
type crashWorkload struct {
	t    *testing.T
	rec  *recFS
	path string
	opts []Option
	s    *Store
	acks []crashAck
	held []crashAck // appended under FsyncNone, acknowledged by the next Close

	corruptStep int   // where the bit flip is in the log (0: none)
	corruptIno  int   // in which file
	corruptOff  int64 // the payload offset of the record it hit
}

func (w *crashWorkload) open(extra ...Option) {
	w.t.Helper()
	s, err := Open(w.path, append(append(w.rec.options(), w.opts...), extra...)...)
	if err != nil {
		w.t.Fatalf("workload: open: %v", err)
	}
	w.s = s
}

func (w *crashWorkload) close() {
	w.t.Helper()
	if err := w.s.Close(); err != nil {
		w.t.Fatalf("workload: close: %v", err)
	}
	for _, a := range w.held {
		a.step = w.rec.steps()
		w.acks = append(w.acks, a)
	}
	w.held = nil
}

func (w *crashWorkload) fence(name string, epoch uint64) {
	w.t.Helper()
	if err := w.s.Fence(name, epoch); err != nil {
		w.t.Fatalf("workload: fence %s %d: %v", name, epoch, err)
	}
	w.acks = append(w.acks, crashAck{step: w.rec.steps(), producer: name, epoch: epoch})
}

// appendRecs appends n records of size bytes each to (topic, producer)
// from seq first; held: under FsyncNone, acknowledged by the next close.
func (w *crashWorkload) appendRecs(topic, producer string, epoch, first uint64, n, size int, held bool) {
	w.t.Helper()
	recs := make([]broker.Record, n)
	for i := range recs {
		seq := first + uint64(i)
		p := fmt.Sprintf("<%s/%s/%d/", topic, producer, seq)
		p += strings.Repeat(string(rune('a'+seq%26)), max(0, size-len(p)-1)) + ">"
		recs[i] = broker.Record{Seq: seq, Payload: []byte(p), FrameStart: i%2 == 0} // frames of two: an entry each
	}
	if err := w.s.Append(topic, producer, epoch, recs); err != nil {
		w.t.Fatalf("workload: append %s/%s %d: %v", topic, producer, first, err)
	}
	for _, r := range recs {
		a := crashAck{step: w.rec.steps(), topic: topic, producer: producer, seq: r.Seq, epoch: epoch, payload: string(r.Payload)}
		a.ino, a.off = w.where(a.payload)
		if held {
			w.held = append(w.held, a)
		} else {
			w.acks = append(w.acks, a)
		}
	}
}

// where finds the file that holds payload now, and its offset there.
func (w *crashWorkload) where(payload string) (int, int64) {
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	for name, ino := range w.rec.names {
		data, err := os.ReadFile(filepath.Join(w.rec.dir, name))
		if err != nil {
			continue
		}
		if i := bytes.Index(data, []byte(payload)); i >= 0 && !strings.Contains(name, ".corrupt-") {
			return ino, int64(i)
		}
	}
	w.t.Fatalf("workload: %.20s... is in no file", payload)
	return 0, 0
}

// corrupt flips a bit in the payload of a, which must be in the active
// segment with entries after it: damage no crash leaves.
func (w *crashWorkload) corrupt(a crashAck) {
	w.t.Helper()
	w.corruptStep = w.rec.steps() + 1 // after its write, before its fsync
	if err := w.rec.corrupt(w.path, a.off+2); err != nil {
		w.t.Fatal(err)
	}
	w.corruptIno, w.corruptOff = a.ino, a.off
}

// run is the workload: producers on several topics, fences, rolls
// (snapshots), a record larger than a segment, retention, a name
// forgotten and its old incarnation refused, a restart, unsynced appends
// made durable by Close, and a repair of damage.
// The multi-page and unsynced parts are done rounds times.
func (w *crashWorkload) run(clock *crashClock, rounds int) {
	t := w.t
	w.open()
	w.fence("p1", 1)
	w.fence("p2", 1)
	w.appendRecs("t1", "p1", 1, 1, 3, 300, false)
	w.appendRecs("t2", "p1", 1, 1, 2, 900, false)
	w.appendRecs("t1", "p2", 1, 1, 1, 13000, false) // larger than a segment: one of its own
	w.s.Pin("p2")
	w.fence("p3", 1)
	for i := range uint64(4) {
		w.appendRecs("t1", "p2", 1, 2+i*2, 2, 700, false)
		w.appendRecs("t2", "p3", 1, 1+i, 1, 1200, false)
	}
	clock.advance(2 * time.Hour) // p1 idle, p2 pinned: the next roll forgets p1 alone
	w.appendRecs("t1", "p3", 1, 1, 1, 9000, false)
	w.appendRecs("t1", "p3", 1, 2, 1, 100, false)
	if err := w.s.Fence("p1", 1); !errors.Is(err, broker.ErrFenced) {
		t.Fatalf("workload: the forgotten incarnation of p1 fences again: %v", err)
	}
	if err := w.s.Append("t1", "p1", 1, []broker.Record{{Seq: 4, Payload: []byte("dup")}}); !errors.Is(err, broker.ErrFenced) {
		t.Fatalf("workload: the forgotten incarnation of p1 appends again: %v", err)
	}
	w.fence("p2", 2)
	for r := range rounds {
		topic := fmt.Sprint("t5.", r)
		for i := range uint64(8) { // entries of one to three pages
			w.appendRecs(topic, "p2", 2, 1+i, 1, 2500+int(i%3)*2500, false)
		}
	}
	w.close()

	// Unsynced appends across pages, fsynced by rolls and Close only.
	for r := range rounds {
		topic := fmt.Sprint("t3.", r)
		w.open(Fsync(FsyncNone))
		for i := range uint64(12) {
			w.appendRecs(topic, "p2", 2, 1+i*3, 3, 100+(int(i%4)+r)*700, true)
		}
		w.close()
	}

	// A bit flipped in an entry with entries after it: Open refuses, Repair
	// moves the damage to a side file; then the store goes on.
	w.open()
	w.appendRecs("t4", "p3", 1, 1, 1, 200, false)
	victim := w.acks[len(w.acks)-1]
	w.appendRecs("t4", "p3", 1, 2, 2, 200, false)
	w.close()
	w.corrupt(victim)
	if _, err := Open(w.path, append(w.rec.options(), w.opts...)...); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("workload: open after the bit flip: %v, want ErrCorrupt", err)
	}
	w.open(Repair())
	if w.s.Recovery().SideFile == "" {
		t.Fatal("workload: nothing repaired")
	}
	w.appendRecs("t4", "p3", 1, 10, 2, 300, false)
	w.close()
}

// crashSegment is the workload's SegmentBytes: three pages.
const crashSegment = 3 * holePage

type crashClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *crashClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *crashClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestCrashStatesRecover: for every state a crash may leave at every step
// of a workload (see crashfs_test.go), the store opens without an
// operator (or refuses the bit flip the workload made, naming it, and
// opens with Repair), every record acknowledged before the crash is there
// once and in order (but for those retention removed and those the repair
// moved aside), no epoch goes back, and a stream forgotten is fenced for
// its old incarnation. -crash.states sets how many of the states to open
// (spread over the whole log; 0: all).
func TestCrashStatesRecover(t *testing.T) {
	clock := &crashClock{now: time.Unix(1_800_000_000, 0)}
	dir := t.TempDir()
	w := &crashWorkload{t: t, rec: newRecFS(dir), path: filepath.Join(dir, "store"),
		opts: []Option{SegmentBytes(crashSegment), RetainBytes(4 * crashSegment),
			ForgetProducersAfter(time.Hour), WithNow(clock.Now)}}
	rounds := 1 + *crashStatesFlag/300 // a longer run, a longer workload
	w.run(clock, rounds)
	ops := w.rec.log()
	states := crashStates(ops)
	pick := states
	if n := *crashStatesFlag; n > 0 && n < len(states) {
		pick = make([]crashState, n)
		for i := range pick {
			pick[i] = states[i*len(states)/n]
		}
	}
	t.Logf("%d operations logged, %d distinct crash states, %d opened (-crash.states=%d)", len(ops), len(states), len(pick), *crashStatesFlag)

	base := t.TempDir()
	for i, st := range pick {
		sdir := filepath.Join(base, fmt.Sprint(i))
		if err := os.Mkdir(sdir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := st.write(sdir); err != nil {
			t.Fatal(err)
		}
		if err := w.check(st, filepath.Join(sdir, "store"), clock); err != nil {
			t.Errorf("crash after step %d (%v), %s: %v", st.step, lastOp(ops, st.step), st.how, err)
			if t.Failed() && testing.Short() {
				return
			}
		}
		_ = os.RemoveAll(sdir)
	}
}

func lastOp(ops []fsOp, k int) string {
	if k == 0 {
		return "nothing"
	}
	return ops[k-1].String()
}

// check opens the crash state st at path and checks it (see
// TestCrashStatesRecover).
func (w *crashWorkload) check(st crashState, path string, clock *crashClock) error {
	opts := []Option{SegmentBytes(crashSegment), ForgetProducersAfter(time.Hour), WithNow(clock.Now)}
	s, err := Open(path, opts...)
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) || w.corruptStep == 0 || st.step < w.corruptStep {
			return fmt.Errorf("open: %w", err)
		}
		// The bit flip: no crash's damage, named, and repaired on demand.
		if s, err = Open(path, append(opts, Repair())...); err != nil {
			return fmt.Errorf("open with Repair after %v: %w", ce, err)
		}
	}
	defer s.Close()
	alive := map[int]bool{} // the workload's files at that step (retention removed the others)
	m := replay(w.rec.ops, st.step)
	for _, ino := range applyDir(m.dir, m.dirOps) {
		alive[ino] = true
	}
	type key struct{ topic, producer string }
	want := map[key][]crashAck{}
	epochs := map[string]uint64{}
	for _, a := range w.acks {
		if a.step > st.step {
			break
		}
		if a.seq == 0 {
			epochs[a.producer] = max(epochs[a.producer], a.epoch)
			continue
		}
		k := key{a.topic, a.producer}
		want[k] = append(want[k], a)
	}
	got := map[key][]uint64{}
	payloads := map[string]bool{}
	err = s.Scan(func(topic, producer string, r broker.Record) error {
		k := key{topic, producer}
		if g := got[k]; len(g) > 0 && r.Seq <= g[len(g)-1] {
			return fmt.Errorf("%s/%s: seq %d after %d", topic, producer, r.Seq, g[len(g)-1])
		}
		got[k] = append(got[k], r.Seq)
		payloads[string(r.Payload)] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	aside := func(a crashAck) bool { // moved aside by the repair of the bit flip
		return w.corruptStep > 0 && a.step < w.corruptStep && st.step >= w.corruptStep &&
			a.ino == w.corruptIno && a.off >= w.corruptOff
	}
	for k, acks := range want {
		for _, a := range acks {
			if payloads[a.payload] || !alive[a.ino] || aside(a) { // !alive: retention removed its segment
				continue
			}
			return fmt.Errorf("%s/%s: acknowledged seq %d (step %d) lost; have %v", k.topic, k.producer, a.seq, a.step, got[k])
		}
	}
	for k, acks := range want {
		ns, err := s.State(k.topic, k.producer)
		if err != nil {
			return err
		}
		acks = slices.DeleteFunc(slices.Clone(acks), aside) // the repair's producers learn a lower last seq
		if len(acks) == 0 {
			continue
		}
		last := acks[len(acks)-1]
		if ns.LastSeq < last.seq && ns.Epoch <= last.epoch {
			return fmt.Errorf("%s/%s: last seq %d, epoch %d: below the acknowledged seq %d of epoch %d, and that incarnation not fenced",
				k.topic, k.producer, ns.LastSeq, ns.Epoch, last.seq, last.epoch)
		}
	}
	for name, e := range epochs {
		ns, err := s.State("t1", name)
		if err != nil {
			return err
		}
		if ns.Epoch < e {
			return fmt.Errorf("%s: epoch %d, below the acknowledged fence %d", name, ns.Epoch, e)
		}
	}
	// It goes on: a new stream appends and its record reads back.
	ns, err := s.State("after", "crash")
	if err != nil {
		return err
	}
	if err := s.Fence("crash", ns.Epoch+1); err != nil {
		return fmt.Errorf("fence after recovery: %w", err)
	}
	if err := s.Append("after", "crash", ns.Epoch+1, []broker.Record{{Seq: 1, Payload: []byte("x")}}); err != nil {
		return fmt.Errorf("append after recovery: %w", err)
	}
	if err := s.Verify(); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return s.Close()
}
