package natsjs

// SetBeforeWrite makes f run before every write of s (a message or an
// atomic batch), with the records' sequence ID range. Set it before use.
func SetBeforeWrite(s *Store, f func(subject string, first, last uint64)) { s.beforeWrite = f }

// SetAfterChunk makes f run after each chunk of a fast batch of s went
// out, with the batch's records sent so far. Set it before use.
func SetAfterChunk(s *Store, f func(subject string, sent int)) { s.afterChunk = f }

// FirstChunk is how many records the first write of a fast batch holds.
const FirstChunk = firstChunk

// SetDirectHook makes f rewrite what a direct read of s returned (stream
// sequence and Inflight-Last-Seq of the subject's last message): a test
// plays a lagging replica with it. Set it before use.
func SetDirectHook(s *Store, f func(subject string, streamSeq, last uint64) (uint64, uint64)) {
	s.directHook = func(subject string, t tail) tail {
		t.streamSeq, t.last = f(subject, t.streamSeq, t.last)
		return t
	}
}

// NoFastBatch makes stores of cfg write atomic batches even where fast
// ones would do.
func NoFastBatch(cfg Config) Config { cfg.noFast = true; return cfg }

// UsesFastBatch reports whether s writes fast batches.
func UsesFastBatch(s *Store) bool { return s.useFast.Load() }

// PubDials returns how many connections of its own s dialed for writes.
func PubDials(s *Store) int {
	s.pub.mu.Lock()
	defer s.pub.mu.Unlock()
	return s.pub.dials
}

// IsNoFastBatch reports whether cfg was made by NoFastBatch.
func IsNoFastBatch(cfg Config) bool { return cfg.noFast }
