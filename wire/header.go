package wire

// Header is one key/value pair of a record's metadata. A record's headers
// are ordered and a key may repeat. Value is referenced, not copied, by
// whoever builds or decodes a frame; see the doc of each user.
type Header struct {
	Key   string
	Value []byte
}
