package archive

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

func bufioWriter(w io.Writer) *bufio.Writer { return bufio.NewWriter(w) }

// FuzzReadCAR feeds Read anything: it must return an archive or an
// error, never panic, and what it returns must write back to the bytes
// it read (an archive has one encoding).
func FuzzReadCAR(f *testing.F) {
	good := write(f, chain(f, "th_a", 2), chain(f, "th_b", 1))
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:40])
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xa1, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x02})
	f.Add(append(bytes.Clone(good), 0x80))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if _, err := Write(&buf, a.Threads); err != nil {
			t.Fatalf("an archive Read accepts does not write: %v", err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("Read accepted bytes that are not the archive's one encoding")
		}
	})
}
