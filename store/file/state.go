package file

// What a Store knows of its producers, and the snapshot that carries it
// from one segment to the next.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/inflightmq/inflight/wire/crc32c"
)

// streamState is what the store knows of one (topic, producer).
type streamState struct {
	last uint64 // its last stored sequence ID
	seen int64  // Unix ns of its last Append, or later (a replay dates what it finds by the time of the replay)
}

// nameState is what the store knows of one producer name, across its
// topics.
type nameState struct {
	epoch uint64 // its newest epoch (see Store.Fence); 0: never fenced
	seen  int64  // Unix ns of its last Fence or Append, or later
	pins  int    // live sessions holding it (Store.Pin): not forgotten while > 0; never stored
}

// state is what the store knows: every (topic, producer)'s last sequence
// ID, every name's epoch, and the store's epoch counter.
//
// epochs is the highest epoch the store ever stored or reserved: it only
// grows, and the snapshots carry it. floor is the epoch reserved when the
// store last forgot names (see forget): above every epoch a forgotten name
// ever had, and given to no one. A name the store does not know has the
// epoch floor, so a forgotten incarnation that comes back is below it
// (fenced), and a new one gets an epoch above it.
type state struct {
	streams map[stream]streamState
	names   map[string]nameState
	epochs  uint64
	floor   uint64
}

func newState() *state {
	return &state{streams: make(map[stream]streamState), names: make(map[string]nameState)}
}

// raiseStream takes the larger of k's last sequence IDs and times; its
// name counts as seen too.
func (m *state) raiseStream(k stream, last uint64, seen int64) {
	s := m.streams[k]
	s.last, s.seen = max(s.last, last), max(s.seen, seen)
	m.streams[k] = s
	m.raiseName(k.producer, 0, seen)
}

// raiseName takes the larger of name's epochs and times (a name new to m
// starts at the floor), and raises the counter to epoch.
func (m *state) raiseName(name string, epoch uint64, seen int64) {
	n, ok := m.names[name]
	if !ok {
		n.epoch = m.floor // a name the store does not know had the floor
	}
	n.epoch, n.seen = max(n.epoch, epoch), max(n.seen, seen)
	m.names[name] = n
	m.epochs = max(m.epochs, epoch)
}

// epochOf returns name's epoch, the floor for a name the store does not
// know, and whether it does not.
func (m *state) epochOf(name string) (epoch uint64, unknown bool) {
	n, ok := m.names[name]
	if !ok {
		return m.floor, true
	}
	return n.epoch, false
}

// A snapshot entry starts every segment a roll creates (versions 3, 5 and
// 7): what the store knew when it rolled, so that opening the store
// replays only the newest segment, and a producer's last sequence ID and
// epoch outlive the segments retention removes (until ForgetProducersAfter,
// if set). Kind 1 (version 3) has the last sequence ID of every (topic,
// producer) and when it last appended; kind 2 (version 5) adds the epoch,
// which was per (topic, producer) then, and is read as its name's; kind 3
// (version 7) has the streams, then every name's epoch, and the store's
// epoch counter and floor (see state):
//
//	| u8 1 | u64 rolled (Unix ns) | u32 n | n x (u8 topicLen | topic | u8 nameLen | name | u64 lastSeq | u64 seen (Unix ns)) |
//	| u8 2 | u64 rolled (Unix ns) | u32 n | n x (u8 topicLen | topic | u8 nameLen | name | u64 lastSeq | u64 seen (Unix ns) | u64 epoch) |
//	| u8 3 | u64 rolled (Unix ns) | u64 epochs | u64 floor |
//	  u32 n | n x (u8 topicLen | topic | u8 nameLen | name | u64 lastSeq | u64 seen (Unix ns)) |
//	  u32 m | m x (u8 nameLen | name | u64 epoch | u64 seen (Unix ns)) |
//
// Streams are written sorted by topic, then name; names sorted. A stream
// of kind 1 or 3 has a lastSeq of at least 1; of kind 2, a lastSeq or an
// epoch of at least 1. A roll writes kind 3; an active segment upgraded
// from version 3 or 5 keeps its snapshot.

// appendSnapshot appends a snapshot entry of kind 3 (header and body) of
// m, taken at rolled, to buf.
func appendSnapshot(buf []byte, m *state, rolled time.Time) []byte {
	keys := slices.SortedFunc(maps.Keys(m.streams), func(a, b stream) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.producer, b.producer))
	})
	start := len(buf)
	buf = append(buf, make([]byte, entryHeaderSize)...)
	buf = append(buf, entrySnapshotNames)
	buf = binary.BigEndian.AppendUint64(buf, uint64(rolled.UnixNano()))
	buf = binary.BigEndian.AppendUint64(buf, m.epochs)
	buf = binary.BigEndian.AppendUint64(buf, m.floor)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(keys)))
	for _, k := range keys {
		s := m.streams[k]
		buf = append(buf, byte(len(k.topic)))
		buf = append(buf, k.topic...)
		buf = append(buf, byte(len(k.producer)))
		buf = append(buf, k.producer...)
		buf = binary.BigEndian.AppendUint64(buf, s.last)
		buf = binary.BigEndian.AppendUint64(buf, uint64(s.seen))
	}
	names := slices.Sorted(maps.Keys(m.names))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(names)))
	for _, name := range names {
		n := m.names[name]
		buf = append(buf, byte(len(name)))
		buf = append(buf, name...)
		buf = binary.BigEndian.AppendUint64(buf, n.epoch)
		buf = binary.BigEndian.AppendUint64(buf, uint64(n.seen))
	}
	body := buf[start+entryHeaderSize:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32c.Checksum(body))
	return buf
}

// parseSnapshot reads a snapshot body of any kind into m (raising each
// stream and name) and returns the time of the roll.
func parseSnapshot(body []byte, m *state) (time.Time, error) {
	if len(body) < 1+8+4 {
		return time.Time{}, errors.New("not a snapshot")
	}
	kind := body[0]
	rolled := time.Unix(0, int64(binary.BigEndian.Uint64(body[1:])))
	p := body[9:]
	var fixed int
	var floor uint64
	switch kind {
	case entrySnapshot:
		fixed = 16 // lastSeq, seen
	case entrySnapshotEpochs:
		fixed = 24 // lastSeq, seen, epoch
	case entrySnapshotNames:
		fixed = 16
		if len(p) < 16+4 {
			return time.Time{}, errors.New("short snapshot")
		}
		var epochs uint64
		epochs, floor = binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
		if floor > epochs {
			return time.Time{}, errors.New("snapshot floor above its epoch counter")
		}
		// The floor is raised last: it is the epoch of names the store
		// does not know, and the names of this snapshot it knows, each
		// with its own epoch (a name kept when others were forgotten, a
		// live one, is below the floor).
		m.epochs = max(m.epochs, epochs)
		p = p[16:]
	default:
		return time.Time{}, errors.New("not a snapshot")
	}
	p, err := parseSnapshotStreams(p, fixed, m)
	if err != nil {
		return time.Time{}, err
	}
	if kind == entrySnapshotNames {
		if p, err = parseSnapshotNames(p, m); err != nil {
			return time.Time{}, err
		}
	}
	if len(p) != 0 {
		return time.Time{}, errors.New("bytes after the snapshot")
	}
	m.floor = max(m.floor, floor)
	return rolled, nil
}

// parseSnapshotStreams reads a snapshot's count of streams and the streams
// of fixed bytes after their names (24: with a kind 2 epoch), and returns
// what follows them.
func parseSnapshotStreams(p []byte, fixed int, m *state) ([]byte, error) {
	if len(p) < 4 {
		return nil, errors.New("short snapshot")
	}
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(n) > uint64(len(p))/uint64(1+1+1+1+fixed) { // checked before the loop: a bad count costs nothing
		return nil, errors.New("snapshot count past its body")
	}
	for range n {
		topic, rest, err := shortString(p, "topic")
		if err != nil {
			return nil, err
		}
		name, rest, err := shortString(rest, "name")
		if err != nil {
			return nil, err
		}
		if len(rest) < fixed {
			return nil, errors.New("short snapshot")
		}
		seq, seen := binary.BigEndian.Uint64(rest), int64(binary.BigEndian.Uint64(rest[8:]))
		var epoch uint64
		if fixed == 24 {
			epoch = binary.BigEndian.Uint64(rest[16:])
		}
		if seq == 0 && epoch == 0 {
			return nil, errors.New("snapshot with sequence ID 0")
		}
		if seq > 0 {
			m.raiseStream(stream{string(topic), string(name)}, seq, seen)
		}
		m.raiseName(string(name), epoch, seen) // a kind 2 epoch was per topic: the name's is the highest
		p = rest[fixed:]
	}
	return p, nil
}

// parseSnapshotNames reads the names of a kind 3 snapshot and returns what
// follows them.
func parseSnapshotNames(p []byte, m *state) ([]byte, error) {
	if len(p) < 4 {
		return nil, errors.New("short snapshot")
	}
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(n) > uint64(len(p))/uint64(1+1+16) {
		return nil, errors.New("snapshot name count past its body")
	}
	for range n {
		name, rest, err := shortString(p, "name")
		if err != nil {
			return nil, err
		}
		if len(rest) < 16 {
			return nil, errors.New("short snapshot")
		}
		epoch, seen := binary.BigEndian.Uint64(rest), int64(binary.BigEndian.Uint64(rest[8:]))
		if epoch > m.epochs {
			return nil, errors.New("snapshot name epoch above its epoch counter")
		}
		m.raiseName(string(name), epoch, seen)
		p = rest[16:]
	}
	return p, nil
}
