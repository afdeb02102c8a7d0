// Package file is inflight's durable store on one machine: a
// broker.Store in append-only, CRC-checked segment files, locked against a
// second writer, replayed at open, rolled at a size, and retained by age
// or bytes. See Store for the format and what survives a crash, a flipped
// bit and a full disk, and FsyncPolicy for when an acknowledged record is
// on disk.
//
//	s, err := file.Open("/var/lib/inflight/orders", file.Fsync(file.FsyncBatch))
//	b, err := broker.New(s)
//
// The broker's sessions call Append, or AppendFrames with the producer's
// frames as they came (broker.FrameAppender), concurrently, one per
// producer, each with every record that arrived while its previous call
// ran; the store commits what is written meanwhile with one fsync (group
// commit), so many producers cost about as many fsyncs as one.
//
// Reading back: Store.Scan reads what a store holds (ReadOnly opens it
// beside a running writer); a Reader (OpenReader) follows it as it is
// written, from a Position that a program can keep to go on where it
// stopped, across rolls, retention and restarts of the writer.
package file
