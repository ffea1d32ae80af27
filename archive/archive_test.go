package archive

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/spl-dev/spl/records"
)

const actor = "did:sync:agent:test"

// chain builds a thread of n checkpoints, the second signed, then an
// erasure of the first: n+1 records, the first erased.
func chain(t testing.TB, name string, n int) Thread {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var th Thread
	th.Name = name
	var prev records.ID
	ts := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < n; i++ {
		r, err := records.New(records.ActLearn, records.KindCheckpoint, name, actor, ts.Add(time.Duration(i)*time.Second),
			&records.Checkpoint{Summary: "summary " + name + " " + string(rune('a'+i)), Learnings: []string{"l"}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			r.Sign(key)
		}
		r = r.WithPrev(prev)
		prev = r.ID()
		th.Records = append(th.Records, Record{ID: r.ID(), Header: r.Header, Body: r.Body, Salt: r.Salt, Sig: r.Sig})
	}
	first := th.Records[0]
	er, err := records.New(records.ActForget, records.KindErasure, name, actor, ts.Add(time.Hour),
		&records.Erasure{Targets: []records.ErasureTarget{{ID: first.ID, Header: first.Header, Clock: 1}}, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	er = er.WithPrev(prev)
	th.Records = append(th.Records, Record{ID: er.ID(), Header: er.Header, Body: er.Body, Salt: er.Salt})
	th.Records[0].Body = nil
	th.Records[0].Salt = [records.SaltSize]byte{}
	return th
}

func write(t testing.TB, threads ...Thread) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, threads); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	a, b := chain(t, "th_a", 3), chain(t, "th_b", 1)
	data := write(t, a, b)
	got, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Threads) != 2 || got.Threads[0].Name != "th_a" || got.Threads[1].Name != "th_b" {
		t.Fatalf("threads: %+v", got.Threads)
	}
	for ti, want := range []Thread{a, b} {
		th := got.Threads[ti]
		if len(th.Records) != len(want.Records) {
			t.Fatalf("%s: %d records, want %d", th.Name, len(th.Records), len(want.Records))
		}
		for i, r := range th.Records {
			w := want.Records[i]
			if r.ID != w.ID || r.Header != w.Header || !bytes.Equal(r.Body, w.Body) || r.Salt != w.Salt || r.Erased() != w.Erased() {
				t.Errorf("%s record %d differs", th.Name, i)
			}
			if (r.Sig == nil) != (w.Sig == nil) || r.Sig != nil && r.Sig.String() != w.Sig.String() {
				t.Errorf("%s record %d: signature %v, want %v", th.Name, i, r.Sig, w.Sig)
			}
		}
	}
	if !got.Threads[0].Records[0].Erased() || got.Threads[0].Records[1].Sig == nil {
		t.Fatal("the erased record or the signature did not survive")
	}
	// Written again, the same bytes: the archive is deterministic.
	if again := write(t, got.Threads...); !bytes.Equal(again, data) {
		t.Fatal("writing what was read gives other bytes")
	}
}

// TestBlocksCheckableWithoutSpl reads the file as any CAR tool would and
// checks what the package documentation promises: every CID is the
// BLAKE3-256 of its block's data, a header block's CID is the record's
// id, and its bd is BLAKE3 keyed with the body block's salt over its body.
func TestBlocksCheckableWithoutSpl(t *testing.T) {
	a := chain(t, "th_a", 2)
	data := write(t, a)
	cr, err := NewCARReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	byCID := map[string][]byte{}
	for {
		b, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := blake3.Sum256(b.Data); !bytes.Equal(d[:], b.CID[4:]) {
			t.Fatalf("block %d: CID is not the BLAKE3 of the data", b.Index)
		}
		byCID[string(b.CID)] = b.Data
	}
	if len(cr.Roots) != 1 || cr.Roots[0][1] != codecDag {
		t.Fatalf("roots: %x", cr.Roots)
	}
	for _, r := range a.Records {
		hdr, ok := byCID[string(r.ID.Bytes())]
		if !ok {
			t.Fatalf("no block under the id %s", r.ID)
		}
		if !bytes.Equal(hdr, r.Header.Encode()) {
			t.Fatalf("block %s is not the header", r.ID)
		}
		if r.Erased() {
			if bytes.Contains(data, []byte("summary th_a a")) {
				t.Fatal("the erased body is in the archive")
			}
			continue
		}
		bb := byCID[string(cidOf(codecCBOR, bodyBlock(r.Body, r.Salt)))]
		body, salt, err := splitBodyBlock(bb)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := blake3.NewKeyed(salt[:])
		h.Write(body)
		if !bytes.Equal(h.Sum(nil), r.Header.BD[:]) {
			t.Fatalf("record %s: keyed BLAKE3 of the body block is not bd", r.ID)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	a := chain(t, "th_a", 2)
	broken := a
	broken.Records = append([]Record(nil), a.Records...)
	broken.Records[1], broken.Records[2] = broken.Records[2], broken.Records[1]
	noErasure := Thread{Name: "th_a", Records: a.Records[:2]}
	for name, th := range map[string]Thread{"broken chain": broken, "erased without erasure": noErasure} {
		if _, err := Write(io.Discard, []Thread{th}); !errors.Is(err, records.ErrCorrupt) {
			t.Errorf("%s: Write = %v, want ErrCorrupt", name, err)
		}
	}
}

// mutate returns a copy of data with f applied.
func mutate(data []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(data)) }

func TestReadRefuses(t *testing.T) {
	a := chain(t, "th_a", 2)
	good := write(t, a)
	secs := sections(t, good)
	hdrLen := secs[0][0] // the index block's section starts where the header ends
	firstBlock := hdrLen
	extra := func() []byte {
		d := []byte{0xa0}
		return append(appendUvarint(nil, uint64(cidLen+len(d))), append(cidOf(codecCBOR, d), d...)...)
	}()
	cases := []struct {
		name string
		data []byte
		want string // in the error
	}{
		{"empty", nil, "empty file"},
		{"not a CAR", []byte("hello, world"), "archive header"},
		{"truncated header", good[:5], "truncated"},
		{"truncated in a block", good[:len(good)-10], "truncated"},
		{"truncated in a length", append(bytes.Clone(good), 0x80), "ends inside the block's length"},
		{"flipped byte in the last block", mutate(good, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "does not match its data"},
		{"flipped byte in the index", mutate(good, func(b []byte) []byte { b[firstBlock+40] ^= 1; return b }), "does not match its data"},
		{"a block not in the index", append(bytes.Clone(good), extra...), "does not name the block"},
		{"a block repeated", append(bytes.Clone(good), good[firstBlock:]...), "repeats block"},
		{"the root missing", append(bytes.Clone(good[:hdrLen]), good[secs[0][1]:]...), "no block of the file"},
		{"a block missing", bytes.Clone(good[:secs[0][1]]), "not in the file"},
		{"zero-length block", append(bytes.Clone(good), 0x00), "length 0"},
		{"non-minimal varint", append(bytes.Clone(good), 0x81, 0x00), "minimal"},
		{"CARv2", append([]byte{0x0a}, []byte{0xa1, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x02}...), "CARv2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.data))
			if err == nil {
				t.Fatal("read without error")
			}
			if !errors.Is(err, ErrFormat) || !errors.Is(err, records.ErrCorrupt) {
				t.Errorf("error does not wrap ErrFormat and ErrCorrupt: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// TestEveryTruncationRefused cuts the archive at every byte: each prefix
// is refused (never read as a smaller archive), naming where.
func TestEveryTruncationRefused(t *testing.T) {
	good := write(t, chain(t, "th_a", 2))
	for n := 0; n < len(good); n++ {
		_, err := Read(bytes.NewReader(good[:n]))
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("cut at %d: %v, want a *FormatError", n, err)
		}
	}
}

// TestTamperedRecordRefused re-signs nothing and re-hashes every block,
// as a forger with a CAR tool would: the blocks then match their CIDs,
// but the chain, the ids and the digests do not.
func TestTamperedRecordRefused(t *testing.T) {
	a := chain(t, "th_a", 3)
	// Another body under the same header: the body block's CID is right
	// for its data, the header's bd is not.
	forged := a
	forged.Records = append([]Record(nil), a.Records...)
	forged.Records[2].Body = forged.Records[1].Body
	var buf bytes.Buffer
	if _, err := Write(&buf, []Thread{forged}); err == nil {
		t.Fatal("Write took a body that is not the header's")
	}
	idx := index{Format: FormatName, V: Version, Threads: []indexThread{{Thread: "th_a"}}}
	var blocks [][2][]byte
	for i, r := range a.Records {
		ir := indexRecord{H: link(r.ID.Bytes())}
		blocks = append(blocks, [2][]byte{r.ID.Bytes(), r.Header.Encode()})
		if !r.Erased() {
			body := r.Body
			if i == 2 {
				body = a.Records[1].Body
			}
			d := bodyBlock(body, r.Salt)
			l := link(cidOf(codecCBOR, d))
			ir.B = &l
			blocks = append(blocks, [2][]byte{l, d})
		}
		idx.Threads[0].Records = append(idx.Threads[0].Records, ir)
	}
	data, _ := encMode.Marshal(idx)
	root := cidOf(codecDag, data)
	buf.Reset()
	cw := &carWriter{w: bufioWriter(&buf)}
	cw.header(root)
	cw.block(root, data)
	for _, b := range blocks {
		cw.block(b[0], b[1])
	}
	if err := cw.flush(); err != nil {
		t.Fatal(err)
	}
	_, err := Read(bytes.NewReader(buf.Bytes()))
	if !errors.Is(err, records.ErrCorrupt) || !strings.Contains(err.Error(), "record 2") {
		t.Fatalf("Read = %v, want the body of record 2 refused", err)
	}
}

// sections returns where each block's section starts and ends in data.
func sections(t *testing.T, data []byte) [][2]int {
	t.Helper()
	cr, err := NewCARReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int
	for {
		b, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 {
			out[len(out)-1][1] = int(b.Offset)
		}
		out = append(out, [2]int{int(b.Offset), len(data)})
	}
	return out
}
