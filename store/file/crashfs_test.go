package file

// A recording file layer and the states a crash can leave, for
// TestCrashStatesRecover (ALICE, "All File Systems Are Not Created Equal",
// OSDI 2014, builds crash states the same way).
//
// recFS sits under a Store as its fileSystem and wraps its files (withFS,
// withFile): every operation that changes the store's directory or a file
// goes to the OS and into a log, in order. A crash state at step k is what
// the disk may hold after the first k operations:
//
//	file data:  durable (up to the file's last fsync)  +  pending writes and truncates
//	            pending: none, all, a prefix, a prefix and the next one in part,
//	            4 KiB pages of them dropped, reordered (later ones only), zero-filled
//	directory:  durable (up to the last directory fsync)  +  a prefix of the
//	            pending creates, links, renames and removals
//
// An fsync of a file says nothing about its name: a file created, linked
// or renamed and fsynced, but whose directory was not, may be missing or
// under its old name.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

type opKind int

const (
	opCreate opKind = iota // name -> new ino
	opWrite                // ino, off, data
	opTrunc                // ino, size
	opSync                 // ino
	opRemove               // name
	opLink                 // name -> name2
	opRename               // name -> name2
	opSyncDir
)

func (k opKind) String() string {
	return [...]string{"create", "write", "truncate", "fsync", "remove", "link", "rename", "fsync dir"}[k]
}

// fsOp is one operation of the log. Names are base names in the store's
// directory.
type fsOp struct {
	kind        opKind
	ino         int
	name, name2 string
	off         int64
	data        []byte
	size        int64
}

func (o fsOp) isDir() bool { return o.kind == opCreate || o.kind >= opRemove && o.kind <= opRename }

func (o fsOp) String() string {
	switch o.kind {
	case opCreate:
		return fmt.Sprintf("create %s (ino %d)", o.name, o.ino)
	case opWrite:
		return fmt.Sprintf("write ino %d [%d, %d)", o.ino, o.off, o.off+int64(len(o.data)))
	case opTrunc:
		return fmt.Sprintf("truncate ino %d to %d", o.ino, o.size)
	case opSync:
		return fmt.Sprintf("fsync ino %d", o.ino)
	case opRemove:
		return "remove " + o.name
	case opLink, opRename:
		return fmt.Sprintf("%s %s -> %s", o.kind, o.name, o.name2)
	}
	return o.kind.String()
}

// recFS records a Store's operations on one directory (see the top of
// this file). Safe for concurrent use.
type recFS struct {
	dir string

	mu    sync.Mutex
	ops   []fsOp
	names map[string]int // the directory now: name -> ino
	inos  map[*os.File]int
	next  int
}

func newRecFS(dir string) *recFS {
	return &recFS{dir: dir, names: map[string]int{}, inos: map[*os.File]int{}}
}

// options make a Store go through r.
func (r *recFS) options() []Option {
	return []Option{withFS(r), withFile(r.wrap)}
}

// steps is how many operations were logged so far.
func (r *recFS) steps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// log returns the operations so far.
func (r *recFS) log() []fsOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func (r *recFS) add(o fsOp) { r.ops = append(r.ops, o) }

func (r *recFS) base(name string) string {
	if filepath.Dir(name) != filepath.Clean(r.dir) {
		panic("recFS: " + name + " is not in " + r.dir)
	}
	return filepath.Base(name)
}

func (r *recFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.base(name)
	ino, ok := r.names[b]
	switch {
	case !ok:
		r.next++
		ino = r.next
		r.names[b] = ino
		r.add(fsOp{kind: opCreate, ino: ino, name: b})
	case flag&os.O_TRUNC != 0:
		r.add(fsOp{kind: opTrunc, ino: ino})
	}
	r.inos[f] = ino
	return f, nil
}

func (r *recFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.base(name)
	delete(r.names, b)
	r.add(fsOp{kind: opRemove, name: b})
	return nil
}

func (r *recFS) Link(oldname, newname string) error {
	if err := os.Link(oldname, newname); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, n := r.base(oldname), r.base(newname)
	r.names[n] = r.names[o]
	r.add(fsOp{kind: opLink, name: o, name2: n})
	return nil
}

func (r *recFS) Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, n := r.base(oldpath), r.base(newpath)
	r.names[n] = r.names[o]
	delete(r.names, o)
	r.add(fsOp{kind: opRename, name: o, name2: n})
	return nil
}

func (r *recFS) SyncDir(dir string) error {
	if err := (osFS{}).SyncDir(dir); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(fsOp{kind: opSyncDir})
	return nil
}

// wrap records the writes, truncates and fsyncs of a file r opened.
func (r *recFS) wrap(f storeFile) storeFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	ino, ok := r.inos[f.(osFile).File]
	if !ok {
		panic("recFS: a file it did not open")
	}
	return &recFile{storeFile: f, r: r, ino: ino}
}

// corrupt flips a bit of the file named name at off, through the OS and
// the log, and fsyncs it: damage that is not a crash's.
func (r *recFS) corrupt(name string, off int64) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ino := r.names[r.base(name)]
	r.add(fsOp{kind: opWrite, ino: ino, off: off, data: b})
	r.add(fsOp{kind: opSync, ino: ino})
	return nil
}

type recFile struct {
	storeFile
	r   *recFS
	ino int
}

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.storeFile.WriteAt(p, off)
	f.record(fsOp{kind: opWrite, ino: f.ino, off: off, data: bytes.Clone(p[:n])})
	return n, err
}

func (f *recFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	n, err := f.storeFile.WriteBuffersAt(bufs, off)
	f.record(fsOp{kind: opWrite, ino: f.ino, off: off, data: bytes.Join(bufs, nil)[:n]})
	return n, err
}

func (f *recFile) Truncate(size int64) error {
	err := f.storeFile.Truncate(size)
	if err == nil {
		f.record(fsOp{kind: opTrunc, ino: f.ino, size: size})
	}
	return err
}

func (f *recFile) Sync() error {
	err := f.storeFile.Sync()
	if err == nil {
		f.record(fsOp{kind: opSync, ino: f.ino})
	}
	return err
}

func (f *recFile) record(o fsOp) {
	if o.kind == opWrite && len(o.data) == 0 {
		return
	}
	f.r.mu.Lock()
	f.r.add(o)
	f.r.mu.Unlock()
}

// crashState is a directory a crash may leave: names, the files they
// name (several names may name one file: hard links), their contents.
type crashState struct {
	step  int    // after this many operations
	how   string // which of them reached the disk
	names map[string]int
	files map[int][]byte
}

// key identifies s, for telling states apart.
func (s crashState) key() [32]byte {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(s.names)) {
		fmt.Fprintf(h, "%s\x00%d\x00", name, s.names[name])
	}
	for _, ino := range slices.Sorted(maps.Keys(s.files)) {
		fmt.Fprintf(h, "%d\x00%d\x00", ino, len(s.files[ino]))
		h.Write(s.files[ino])
	}
	return [32]byte(h.Sum(nil))
}

// write makes the state's files in dir.
func (s crashState) write(dir string) error {
	first := map[int]string{}
	for _, name := range slices.Sorted(maps.Keys(s.names)) {
		ino, path := s.names[name], filepath.Join(dir, name)
		var err error
		if f, ok := first[ino]; ok {
			err = os.Link(f, path)
		} else {
			first[ino] = path
			err = os.WriteFile(path, s.files[ino], 0o600)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// model is what the log says of the disk after some operations: each
// file's durable data and the data operations after its last fsync; the
// durable directory and the directory operations after its last fsync.
type model struct {
	durable map[int][]byte
	pending map[int][]fsOp
	dir     map[string]int
	dirOps  []fsOp
}

// replay builds the model of the first k operations of ops.
func replay(ops []fsOp, k int) *model {
	m := &model{durable: map[int][]byte{}, pending: map[int][]fsOp{}, dir: map[string]int{}}
	for _, o := range ops[:k] {
		switch {
		case o.isDir():
			m.dirOps = append(m.dirOps, o)
		case o.kind == opSyncDir:
			m.dir = applyDir(m.dir, m.dirOps)
			m.dirOps = nil
		case o.kind == opSync:
			m.durable[o.ino] = applyData(m.durable[o.ino], m.pending[o.ino], nil)
			delete(m.pending, o.ino)
		default:
			m.pending[o.ino] = append(m.pending[o.ino], o)
		}
	}
	return m
}

// applyDir returns dir with ops applied.
func applyDir(dir map[string]int, ops []fsOp) map[string]int {
	out := maps.Clone(dir)
	for _, o := range ops {
		switch o.kind {
		case opCreate:
			out[o.name] = o.ino
		case opRemove:
			delete(out, o.name)
		case opLink:
			out[o.name2] = out[o.name]
		case opRename:
			out[o.name2] = out[o.name]
			delete(out, o.name)
		}
	}
	return out
}

// pageMode says what reaches the disk of one 4 KiB page of a file that
// pending writes touched. Within a page the writes land in the order they
// were made (the page cache merges them); pages land in any order.
type pageMode int

const (
	pageLost pageMode = iota // never written: the old bytes (zeros past the old end, if a later page extends the file)
	pageKept                 // every pending write to it
	pageZero                 // the file's size grew, the data did not get there: zeros where the writes were
)

// pagesOf returns the distinct pages (offset / holePage) that the writes
// of ops touch, in order of offset.
func pagesOf(ops []fsOp) []int64 {
	seen := map[int64]bool{}
	for _, o := range ops {
		if o.kind != opWrite {
			continue
		}
		for p := o.off / holePage; p*holePage < o.off+int64(len(o.data)); p++ {
			seen[p] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// applyData returns data with ops applied; mode, if not nil, says per
// page (its index in pagesOf(ops)) what reaches the disk, and truncates
// always do.
func applyData(data []byte, ops []fsOp, mode func(page int) pageMode) []byte {
	data = bytes.Clone(data)
	index := map[int64]int{}
	for i, p := range pagesOf(ops) {
		index[p] = i
	}
	for _, o := range ops {
		switch o.kind {
		case opTrunc:
			if o.size <= int64(len(data)) {
				data = data[:o.size]
			} else {
				data = append(data, make([]byte, o.size-int64(len(data)))...)
			}
		case opWrite:
			for from := int64(0); from < int64(len(o.data)); {
				off := o.off + from
				to := min(int64(len(o.data)), (off/holePage+1)*holePage-o.off)
				m := pageKept
				if mode != nil {
					m = mode(index[off/holePage])
				}
				if m != pageLost {
					if end := o.off + to; end > int64(len(data)) {
						data = append(data, make([]byte, end-int64(len(data)))...)
					}
					if m == pageKept {
						copy(data[off:], o.data[from:to])
					} else {
						clear(data[off : o.off+to])
					}
				}
				from = to
			}
		}
	}
	return data
}

// dataVariant is one way the pending operations of a file reach the disk.
type dataVariant struct {
	name  string
	apply func(durable []byte, ops []fsOp) []byte
}

// dataVariants returns the ways the pending operations of a file may reach
// the disk, with prefixes of up to n operations and single pages of up to
// pages lost or zero-filled.
func dataVariants(n, pages int) []dataVariant {
	vs := []dataVariant{
		{"none", func(d []byte, ops []fsOp) []byte { return bytes.Clone(d) }},
		{"all", func(d []byte, ops []fsOp) []byte { return applyData(d, ops, nil) }},
		{"all zero-filled", func(d []byte, ops []fsOp) []byte {
			return applyData(d, ops, func(int) pageMode { return pageZero })
		}},
		{"first page zero-filled, the rest kept", func(d []byte, ops []fsOp) []byte {
			return applyData(d, ops, func(p int) pageMode {
				if p == 0 {
					return pageZero
				}
				return pageKept
			})
		}},
		{"first page lost, the rest kept", func(d []byte, ops []fsOp) []byte {
			return applyData(d, ops, func(p int) pageMode { return pageMode(min(p, 1)) * pageKept })
		}},
		{"last page only", func(d []byte, ops []fsOp) []byte {
			last := len(pagesOf(ops)) - 1
			return applyData(d, ops, func(p int) pageMode {
				if p == last {
					return pageKept
				}
				return pageLost
			})
		}},
		{"every other page", func(d []byte, ops []fsOp) []byte {
			return applyData(d, ops, func(p int) pageMode { return pageMode(p%2) * pageKept })
		}},
	}
	for i := range pages {
		for _, m := range []pageMode{pageLost, pageZero} {
			vs = append(vs, dataVariant{fmt.Sprintf("page %d %s, the rest kept", i, [...]string{"lost", "", "zero-filled"}[m]),
				func(d []byte, ops []fsOp) []byte {
					return applyData(d, ops, func(p int) pageMode {
						if p == i {
							return m
						}
						return pageKept
					})
				}})
		}
	}
	for i := 1; i <= n; i++ {
		vs = append(vs,
			dataVariant{fmt.Sprintf("first %d", i-1) + " and half the next", func(d []byte, ops []fsOp) []byte {
				i := min(i, len(ops))
				o := ops[i-1]
				if o.kind == opWrite {
					o.data = o.data[:len(o.data)/2]
				}
				return applyData(d, append(slices.Clone(ops[:i-1]), o), nil)
			}})
		if i < n {
			vs = append(vs, dataVariant{fmt.Sprintf("first %d", i), func(d []byte, ops []fsOp) []byte {
				return applyData(d, ops[:min(i, len(ops))], nil)
			}})
		}
	}
	return vs
}

// crashStates returns the distinct states a crash may leave at every step
// of ops (see the top of this file), in step order.
func crashStates(ops []fsOp) []crashState {
	seen := map[[32]byte]bool{}
	var out []crashState
	for k := 0; k <= len(ops); k++ {
		m := replay(ops, k)
		most, pages := 0, 0
		for _, p := range m.pending {
			most, pages = max(most, len(p)), max(pages, len(pagesOf(p)))
		}
		for j := 0; j <= len(m.dirOps); j++ {
			dir := applyDir(m.dir, m.dirOps[:j])
			vs := dataVariants(min(most, 8), min(pages, 8))
			if most == 0 {
				vs = vs[:1] // nothing pending: one state
			}
			for _, v := range vs {
				s := crashState{step: k, how: fmt.Sprintf("%d of %d directory operations; data: %s", j, len(m.dirOps), v.name),
					names: dir, files: map[int][]byte{}}
				for _, ino := range dir {
					data := m.durable[ino]
					if p := m.pending[ino]; len(p) > 0 {
						data = v.apply(data, p)
					}
					s.files[ino] = data
				}
				if key := s.key(); !seen[key] {
					seen[key] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}
