package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/inflightmq/inflight/wire"
)

func TestControlRoundTrip(t *testing.T) {
	mustHello := func(h wire.Hello) []byte {
		f, err := wire.AppendHello([]byte("prefix"), h)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name   string
		frame  []byte // encoded after the 6 bytes "prefix"
		decode func([]byte) (any, error)
		want   any
	}{
		{"hello", mustHello(wire.Hello{Version: wire.Version, MaxFrameSize: wire.MinMaxFrameSize, Producer: "p"}),
			decoders[wire.TypeHello], wire.Hello{Version: wire.Version, MaxFrameSize: wire.MinMaxFrameSize, Producer: "p"}},
		{"hello long name", mustHello(wire.Hello{Version: wire.Version, MaxFrameSize: math.MaxUint32, Producer: strings.Repeat("n", 255)}),
			decoders[wire.TypeHello], wire.Hello{Version: wire.Version, MaxFrameSize: math.MaxUint32, Producer: strings.Repeat("n", 255)}},
		{"hello epoch and yield", mustHello(wire.Hello{Version: wire.Version, MaxFrameSize: wire.MinMaxFrameSize, Epoch: math.MaxUint64, Yield: true, Producer: "p"}),
			decoders[wire.TypeHello], wire.Hello{Version: wire.Version, MaxFrameSize: wire.MinMaxFrameSize, Epoch: math.MaxUint64, Yield: true, Producer: "p"}},
		{"hello_ok zero seq", wire.AppendHelloOK([]byte("prefix"), wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}),
			decoders[wire.TypeHelloOK], wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}},
		{"hello_ok max seq", wire.AppendHelloOK([]byte("prefix"), wire.HelloOK{MaxFrameSize: 1 << 10, Epoch: math.MaxUint64}),
			decoders[wire.TypeHelloOK], wire.HelloOK{MaxFrameSize: 1 << 10, Epoch: math.MaxUint64}},
		{"receipt", wire.AppendReceipt([]byte("prefix"), wire.Receipt{Topic: 3, Seq: 1 << 40}),
			decoders[wire.TypeReceipt], []wire.Receipt{{Topic: 3, Seq: 1 << 40}}},
		{"receipt zero", wire.AppendReceipt([]byte("prefix"), wire.Receipt{}),
			decoders[wire.TypeReceipt], []wire.Receipt{{}}},
		{"receipts", wire.AppendReceipts([]byte("prefix"), []wire.Receipt{{Topic: 1, Seq: 2}, {Topic: math.MaxUint32, Seq: math.MaxUint64}}),
			decoders[wire.TypeReceipt], []wire.Receipt{{Topic: 1, Seq: 2}, {Topic: math.MaxUint32, Seq: math.MaxUint64}}},
		{"topic", wire.AppendTopicOK([]byte("prefix"), wire.TopicOK{ID: 9, LastSeq: 77}),
			decoders[wire.TypeTopicOK], wire.TopicOK{ID: 9, LastSeq: 77}},
		{"topic_error", wire.AppendTopicError([]byte("prefix"), wire.TopicError{ID: 9, Code: wire.CodeUnauthorized, Text: "no"}),
			decoders[wire.TypeTopicError], wire.TopicError{ID: 9, Code: wire.CodeUnauthorized, Text: "no"}},
		{"error", wire.AppendError([]byte("prefix"), wire.Error{Code: wire.CodeChecksum, Text: "crc mismatch in batch 9"}),
			decoders[wire.TypeError], wire.Error{Code: wire.CodeChecksum, Text: "crc mismatch in batch 9"}},
		{"error unknown code", wire.AppendError([]byte("prefix"), wire.Error{Code: 4242}),
			decoders[wire.TypeError], wire.Error{Code: 4242}},
		{"error max text", wire.AppendError([]byte("prefix"), wire.Error{Code: 1, Text: strings.Repeat("e", 1024)}),
			decoders[wire.TypeError], wire.Error{Code: 1, Text: strings.Repeat("e", 1024)}},
		{"ping", wire.AppendPing([]byte("prefix"), wire.Ping{Nonce: math.MaxUint64}),
			decoders[wire.TypePing], wire.Ping{Nonce: math.MaxUint64}},
		{"pong", wire.AppendPong([]byte("prefix"), wire.Pong{Nonce: 3}),
			decoders[wire.TypePong], wire.Pong{Nonce: 3}},
	} {
		if string(tc.frame[:6]) != "prefix" {
			t.Errorf("%s: encoder clobbered dst", tc.name)
		}
		got, err := tc.decode(tc.frame[6:])
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: decoded %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestEncodersDoNotAllocateWithCapacity(t *testing.T) {
	buf := make([]byte, 0, 64)
	f := wire.AppendPing(buf, wire.Ping{Nonce: 1})
	if &f[0] != &buf[:1][0] {
		t.Error("AppendPing did not use dst's capacity")
	}
}

// TestTruncations cuts every valid frame at every length. A buffer shorter
// than its prefix says is ErrTruncated; a consistent frame whose body is
// cut (prefix rewritten) must fail too, except an ERROR, whose text may be
// any length.
func TestTruncations(t *testing.T) {
	for _, s := range samples(t) {
		for i := range len(s.frame) {
			for typ, dec := range decoders {
				if _, err := dec(s.frame[:i]); !errors.Is(err, wire.ErrTruncated) {
					t.Errorf("%s cut to %d, Decode %v: %v, want ErrTruncated", s.name, i, typ, err)
				}
			}
		}
		bodyLen := len(s.frame) - wire.HeaderSize
		for n := range bodyLen {
			f := withBodyLen(s.frame, n)
			_, err := decoders[s.typ](f)
			if s.typ == wire.TypeError && n >= 2 || s.typ == wire.TypeTopicError && n >= 6 {
				// The text runs to the end: a shorter text.
				if err != nil {
					t.Errorf("%s body cut to %d: %v", s.name, n, err)
				}
				continue
			}
			if s.name == "receipts" && n > 0 && n%12 == 0 {
				// Fewer whole entries.
				if err != nil {
					t.Errorf("%s body cut to %d: %v", s.name, n, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s body cut to %d: decoded", s.name, n)
			}
			if s.typ == wire.TypeReceipt {
				// Not a whole number of entries: malformed.
				if !errors.Is(err, wire.ErrMalformed) {
					t.Errorf("%s body cut to %d: %v, want ErrMalformed", s.name, n, err)
				}
				continue
			}
			if s.typ != wire.TypeBatch && s.typ != wire.TypeError && !errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%s body cut to %d: %v, want ErrTruncated", s.name, n, err)
			}
		}
	}
}

// TestTrailingBytes adds one byte to each body (prefix rewritten), and one
// byte after each whole frame (prefix unchanged).
func TestTrailingBytes(t *testing.T) {
	for _, s := range samples(t) {
		f := append(append([]byte(nil), s.frame...), 0)
		if _, err := decoders[s.typ](f); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s + byte after frame: %v, want ErrMalformed", s.name, err)
		}
		if s.typ == wire.TypeError || s.typ == wire.TypeTopicError {
			continue // text runs to the end
		}
		f = withBodyLen(s.frame, len(s.frame)-wire.HeaderSize+1)
		_, err := decoders[s.typ](f)
		if s.name == "batch_zstd" {
			// rawLen is not tied to the data size for compressed
			// batches, so only the CRC catches the extra byte.
			if !errors.Is(err, wire.ErrChecksum) {
				t.Errorf("%s + byte in body: %v, want ErrChecksum", s.name, err)
			}
			continue
		}
		if !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s + byte in body: %v, want ErrMalformed", s.name, err)
		}
	}
}

func TestDecodeUnexpectedType(t *testing.T) {
	for _, s := range samples(t) {
		for typ, dec := range decoders {
			if typ == s.typ {
				continue
			}
			if _, err := dec(s.frame); !errors.Is(err, wire.ErrUnexpectedType) {
				t.Errorf("Decode %v of %s: %v, want ErrUnexpectedType", typ, s.name, err)
			}
		}
	}
}

func TestHelloErrors(t *testing.T) {
	valid := wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p"}
	for _, tc := range []struct {
		name string
		edit func(*wire.Hello)
	}{
		{"empty name", func(h *wire.Hello) { h.Producer = "" }},
		{"long name", func(h *wire.Hello) { h.Producer = strings.Repeat("n", 256) }},
		{"small limit", func(h *wire.Hello) { h.MaxFrameSize = wire.MinMaxFrameSize - 1 }},
		{"zero limit", func(h *wire.Hello) { h.MaxFrameSize = 0 }},
	} {
		h := valid
		tc.edit(&h)
		dst := []byte("keep")
		got, err := wire.AppendHello(dst, h)
		if !errors.Is(err, wire.ErrMalformed) || string(got) != "keep" {
			t.Errorf("%s: AppendHello = %q, %v; want dst unchanged, ErrMalformed", tc.name, got, err)
		}
	}

	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"version 1 (its layout, no topic)", []byte{0, 1, 0, 0x40, 0, 0, 1, 'p'}, wire.ErrVersion},
		{"version 2 (its layout, no epoch)", []byte{0, 2, 0, 0x40, 0, 0, 1, 'p', 1, 't'}, wire.ErrVersion},
		{"version 3 (its layout, a topic)", append([]byte{0, 3, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0}, 1, 'p', 1, 't'), wire.ErrVersion},
		{"version 5", []byte{0, 5, 0, 0x40, 0, 0, 1, 'p'}, wire.ErrVersion},
		{"version 0", []byte{0, 0, 0, 0x40, 0, 0, 1, 'p', 1, 't'}, wire.ErrVersion},
		{"version 3 other layout", []byte{0, 3}, wire.ErrVersion},
		{"one byte", []byte{0}, wire.ErrTruncated},
		{"no epoch", []byte{0, 4, 0, 0x40, 0, 0, 1, 'p'}, wire.ErrTruncated},
		{"no name length", hb(0), wire.ErrTruncated},
		{"empty name", hb(0, 0), wire.ErrMalformed},
		{"name short", hb(0, 3, 'p', 'q'), wire.ErrTruncated},
		{"unknown flag", hb(2, 1, 'p'), wire.ErrMalformed},
		{"small limit", append([]byte{0, 4, 0, 0, 3, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, 'p'), wire.ErrMalformed},
	} {
		if _, err := wire.DecodeHello(frameOf(wire.TypeHello, tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeHello: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// hb is the body of a version 4 HELLO with a 4 MiB limit and epoch 7, whose
// flags byte and the rest are given.
func hb(flags byte, rest ...byte) []byte {
	return append([]byte{0, 4, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9, flags}, rest...)
}

func TestHelloOKMalformed(t *testing.T) {
	for _, h := range []wire.HelloOK{
		{MaxFrameSize: wire.MinMaxFrameSize - 1, Epoch: 1},
		{MaxFrameSize: wire.MinMaxFrameSize},
	} {
		if _, err := wire.DecodeHelloOK(wire.AppendHelloOK(nil, h)); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("DecodeHelloOK(%+v): %v, want ErrMalformed", h, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	// Over the limit: cut, backing up over a split rune.
	for _, tc := range []struct {
		name string
		text string
		want string
	}{
		{"ascii", strings.Repeat("a", 2000), strings.Repeat("a", 1024)},
		{"rune split", strings.Repeat("a", 1022) + "€tail", strings.Repeat("a", 1022)},
		{"rune fits", strings.Repeat("a", 1021) + "€tail", strings.Repeat("a", 1021) + "€"},
		{"invalid utf8", strings.Repeat("\x80", 2000), strings.Repeat("\x80", 1021)},
	} {
		got, err := wire.DecodeError(wire.AppendError(nil, wire.Error{Code: wire.CodeStore, Text: tc.text}))
		if err != nil || got.Text != tc.want || got.Code != wire.CodeStore {
			t.Errorf("%s: got %d bytes %q..., %v; want %d bytes", tc.name, len(got.Text), got.Text[:min(8, len(got.Text))], err, len(tc.want))
		}
	}

	long := withBodyLen(wire.AppendError(nil, wire.Error{Code: 1}), 2+wire.MaxErrorTextLen+1)
	if _, err := wire.DecodeError(long); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("DecodeError of long text: %v, want ErrMalformed", err)
	}
	short := withBodyLen(wire.AppendError(nil, wire.Error{Code: 1}), 1)
	if _, err := wire.DecodeError(short); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("DecodeError of 1-byte body: %v, want ErrTruncated", err)
	}
}

func TestRemoteError(t *testing.T) {
	err := fmt.Errorf("session: %w", wire.Error{Code: wire.CodeReplaced, Text: "taken over"}.Err())
	var re *wire.RemoteError
	if !errors.As(err, &re) || re.Code != wire.CodeReplaced || re.Text != "taken over" {
		t.Fatalf("errors.As = %+v", re)
	}
	if got, want := re.Error(), "inflight/wire: remote error replaced: taken over"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	empty := wire.Error{Code: 99}.Err().Error()
	if want := "inflight/wire: remote error ErrorCode(99)"; empty != want {
		t.Errorf("Error() = %q, want %q", empty, want)
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.ErrorCode
	}{
		{wire.ErrFrameTooLarge, wire.CodeFrameTooLarge},
		{fmt.Errorf("%w: detail", wire.ErrChecksum), wire.CodeChecksum},
		{fmt.Errorf("outer: %w", fmt.Errorf("%w: x", wire.ErrUnsupportedCodec)), wire.CodeUnsupportedCodec},
		{wire.ErrVersion, wire.CodeVersion},
		{wire.ErrMalformed, wire.CodeProtocol},
		{wire.ErrTruncated, wire.CodeProtocol},
		{wire.ErrUnknownType, wire.CodeProtocol},
		{wire.ErrUnexpectedType, wire.CodeProtocol},
		{errors.New("other"), wire.CodeProtocol},
	} {
		if got := wire.CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// The codes a decoder's errors map to, end to end.
	_, _, err := wire.Split([]byte{0xff, 0, 0, 0}, 0)
	if got := wire.CodeOf(err); got != wire.CodeFrameTooLarge {
		t.Errorf("CodeOf(Split error) = %v", got)
	}
}

func TestHelloToken(t *testing.T) {
	h := wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p"}
	plain, err := wire.AppendHello(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	h.Token = wire.Token(strings.Repeat("k", wire.MaxTokenLen))
	f, err := wire.AppendHello(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(f[wire.HeaderSize:], plain[wire.HeaderSize:]) {
		t.Errorf("a HELLO with a token does not start with the HELLO without one")
	}
	got, err := wire.DecodeHello(f)
	if err != nil || got != h {
		t.Errorf("DecodeHello = %+v, %v; want the token back", got, err)
	}
	h.Token += "k"
	if _, err := wire.AppendHello(nil, h); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("AppendHello of a token over MaxTokenLen: %v, want ErrMalformed", err)
	}

	body := plain[wire.HeaderSize:]
	for _, tc := range []struct {
		name  string
		extra []byte
		want  error
	}{
		{"one byte after the topic", []byte{0}, wire.ErrMalformed},
		{"empty token field", []byte{0, 0}, wire.ErrMalformed},
		{"token shorter than its length", []byte{0, 3, 'a'}, wire.ErrTruncated},
		{"token longer than its length", []byte{0, 1, 'a', 'b'}, wire.ErrMalformed},
		{"token over the limit", append([]byte{0x10, 0x01}, strings.Repeat("k", wire.MaxTokenLen+1)...), wire.ErrMalformed},
	} {
		b := append(bytes.Clone(body), tc.extra...)
		if _, err := wire.DecodeHello(frameOf(wire.TypeHello, b)); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeHello: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestTokenNeverPrints(t *testing.T) {
	const secret = "s3cret-token-value"
	h := wire.Hello{Producer: "p", Token: secret}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	log.Info("hello", "token", h.Token, "hello", h)
	js, _ := json.Marshal(h)
	for _, s := range []string{
		fmt.Sprint(h), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", h, h, h, h.Token, h.Token, h.Token, h.Token, h.Token),
		fmt.Sprintf("%v", &h), h.Token.String(), buf.String(), string(js),
	} {
		if strings.Contains(s, secret) {
			t.Errorf("the token printed: %s", s)
		}
	}
	if string(h.Token) != secret {
		t.Errorf("the token's bytes changed")
	}
}

func TestTopicFrames(t *testing.T) {
	long := strings.Repeat("t", wire.MaxTopicLen)
	for _, tp := range []wire.Topic{{ID: 0, Name: "a"}, {ID: math.MaxUint32, Name: long}, {ID: 7, Name: "orders.eu-1_x"}} {
		f, err := wire.AppendTopic([]byte("prefix"), tp)
		if err != nil {
			t.Fatalf("AppendTopic(%+v): %v", tp, err)
		}
		got, err := wire.DecodeTopic(f[len("prefix"):])
		if err != nil || got != tp {
			t.Errorf("DecodeTopic: %+v, %v; want %+v", got, err, tp)
		}
	}
	for _, name := range []string{"", strings.Repeat("t", wire.MaxTopicLen+1), "a b", "a.>", "a*"} {
		dst := []byte("keep")
		if got, err := wire.AppendTopic(dst, wire.Topic{ID: 1, Name: name}); !errors.Is(err, wire.ErrMalformed) || string(got) != "keep" {
			t.Errorf("AppendTopic(%q) = %q, %v; want dst unchanged, ErrMalformed", name, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"no name length", []byte{0, 0, 0, 1}, wire.ErrTruncated},
		{"name short", []byte{0, 0, 0, 1, 2, 't'}, wire.ErrTruncated},
		{"name long", []byte{0, 0, 0, 1, 1, 't', 'u'}, wire.ErrMalformed},
		{"empty name", []byte{0, 0, 0, 1, 0}, wire.ErrMalformed},
		{"name charset", []byte{0, 0, 0, 1, 1, '*'}, wire.ErrMalformed},
	} {
		if _, err := wire.DecodeTopic(frameOf(wire.TypeTopic, tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeTopic: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := wire.DecodeTopic(wire.AppendTopicOK(nil, wire.TopicOK{ID: 1})); !errors.Is(err, wire.ErrUnexpectedType) {
		t.Errorf("DecodeTopic of a TOPIC_OK: %v, want ErrUnexpectedType", err)
	}
}

func TestTopicOKFrames(t *testing.T) {
	for _, ok := range []wire.TopicOK{{}, {ID: math.MaxUint32, LastSeq: math.MaxUint64}, {ID: 3, LastSeq: 42}} {
		got, err := wire.DecodeTopicOK(wire.AppendTopicOK(nil, ok))
		if err != nil || got != ok {
			t.Errorf("DecodeTopicOK: %+v, %v; want %+v", got, err, ok)
		}
	}
	for _, body := range [][]byte{nil, make([]byte, 11), make([]byte, 13)} {
		if _, err := wire.DecodeTopicOK(frameOf(wire.TypeTopicOK, body)); !errors.Is(err, wire.ErrTruncated) && !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("DecodeTopicOK of a %d-byte body: %v, want ErrTruncated or ErrMalformed", len(body), err)
		}
	}
}

func TestTopicErrorFrames(t *testing.T) {
	for _, e := range []wire.TopicError{
		{ID: 1, Code: wire.CodeUnauthorized, Text: "alice may not write topic x"},
		{ID: math.MaxUint32, Code: wire.ErrorCode(999)},
		{ID: 0, Code: wire.CodeStore, Text: strings.Repeat("x", wire.MaxErrorTextLen)},
	} {
		got, err := wire.DecodeTopicError(wire.AppendTopicError(nil, e))
		if err != nil || got != e {
			t.Errorf("DecodeTopicError: %+v, %v; want %+v", got, err, e)
		}
	}
	// A longer text is cut on the wire.
	got, err := wire.DecodeTopicError(wire.AppendTopicError(nil, wire.TopicError{ID: 2, Code: wire.CodeStore, Text: strings.Repeat("y", wire.MaxErrorTextLen+10)}))
	if err != nil || len(got.Text) > wire.MaxErrorTextLen {
		t.Errorf("long text: %d bytes, %v", len(got.Text), err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"no code", []byte{0, 0, 0, 1}, wire.ErrTruncated},
		{"text too long", append([]byte{0, 0, 0, 1, 0, 7}, strings.Repeat("z", wire.MaxErrorTextLen+1)...), wire.ErrMalformed},
	} {
		if _, err := wire.DecodeTopicError(frameOf(wire.TypeTopicError, tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeTopicError: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestReceiptEntries(t *testing.T) {
	many := make([]wire.Receipt, wire.MaxReceiptEntries)
	for i := range many {
		many[i] = wire.Receipt{Topic: uint32(i), Seq: uint64(i) * 3}
	}
	for _, rs := range [][]wire.Receipt{
		{{Topic: 0, Seq: 1}},
		{{Topic: 1, Seq: 5}, {Topic: math.MaxUint32, Seq: math.MaxUint64}, {Topic: 9, Seq: 0}},
		many,
	} {
		dst := []wire.Receipt{{Topic: 42, Seq: 42}}
		got, err := wire.DecodeReceipts(wire.AppendReceipts(nil, rs), dst)
		if err != nil || len(got) != 1+len(rs) || got[0] != dst[0] {
			t.Fatalf("DecodeReceipts of %d entries: %d, %v", len(rs), len(got), err)
		}
		for i, r := range rs {
			if got[1+i] != r {
				t.Fatalf("entry %d: %+v, want %+v", i, got[1+i], r)
			}
		}
	}
	if got, err := wire.DecodeReceipts(wire.AppendReceipt(nil, wire.Receipt{Topic: 3, Seq: 8}), nil); err != nil || len(got) != 1 || got[0] != (wire.Receipt{Topic: 3, Seq: 8}) {
		t.Errorf("AppendReceipt: %+v, %v", got, err)
	}
	tooMany := append(many, wire.Receipt{Topic: 1})
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"no entry", frameOf(wire.TypeReceipt, nil)},
		{"part of an entry", frameOf(wire.TypeReceipt, make([]byte, 11))},
		{"an entry and a half", frameOf(wire.TypeReceipt, make([]byte, 18))},
		{"too many entries", wire.AppendReceipts(nil, tooMany)},
	} {
		dst := []wire.Receipt{{Topic: 1}}
		got, err := wire.DecodeReceipts(tc.frame, dst)
		if !errors.Is(err, wire.ErrMalformed) || len(got) != 1 {
			t.Errorf("%s: DecodeReceipts: %d entries, %v; want dst unchanged, ErrMalformed", tc.name, len(got), err)
		}
	}
}
