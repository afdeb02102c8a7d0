package broker

// Store decides when a record counts as stored. The broker calls Append for
// a producer from one goroutine at a time (calls for different producers may
// run concurrently) and acknowledges records only after Append returned nil.
type Store interface {
	// LastSeq returns the highest sequence ID stored for producer, or 0.
	LastSeq(producer string) (uint64, error)
	// Append stores records, whose sequence IDs are first, first+1, ...
	// first is always greater than the producer's last stored sequence ID
	// (gaps are possible: a producer skips messages that expired before it
	// could write them). The slices are valid only during the call: a store
	// that keeps them must copy.
	Append(producer string, first uint64, records [][]byte) error
}
