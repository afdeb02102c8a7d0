package file

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteBuffersAt: more buffers than one pwritev takes (Linux's IOV_MAX,
// 1024), of varied sizes (empty ones too), land in order at the offset.
func TestWriteBuffersAt(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bufs [][]byte
	var want bytes.Buffer
	want.WriteString("head")
	for i := range 3*1024 + 7 {
		b := bytes.Repeat([]byte{byte(i)}, i%13)
		bufs = append(bufs, b)
		want.Write(b)
	}
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	n, err := osFile{f}.WriteBuffersAt(bufs, 4)
	if err != nil || n != want.Len()-4 {
		t.Fatalf("wrote %d of %d: %v", n, want.Len()-4, err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file differs from the buffers (%d bytes, want %d)", len(got), want.Len())
	}
}
