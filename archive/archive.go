package archive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/spl-dev/spl/records"
)

// FormatName is the "format" of an archive's index block.
const FormatName = "spl-archive"

// Version is the "v" of the index block this package writes and reads.
const Version = 1

// Record is one record of an archived thread. Body is nil for a record
// an erasure removed: its header stays (the chain goes through it), its
// body and salt are gone.
type Record struct {
	ID     records.ID
	Header records.Header
	Body   []byte
	Salt   [records.SaltSize]byte
	Sig    *records.Signature // nil: unsigned
}

// Erased reports whether the record's body is not in the archive.
func (r Record) Erased() bool { return r.Body == nil }

// Record returns the record as package records has it (nil for an
// erased record, which has no body to verify).
func (r Record) Record() *records.Record {
	if r.Erased() {
		return nil
	}
	return &records.Record{Header: r.Header, Salt: r.Salt, Body: r.Body, Sig: r.Sig}
}

// Thread is a thread's records in chain order: the first has no prev,
// each next one's prev is the id of the one before it.
type Thread struct {
	Name    string
	Records []Record
}

// Archive is what an archive holds: its root (the index block's CID)
// and its threads.
type Archive struct {
	Root    []byte
	Threads []Thread
	Blocks  int   // blocks read, the index included
	Bytes   int64 // bytes read
}

// index is the root block (dag-cbor).
type index struct {
	Format  string        `cbor:"format"`
	Threads []indexThread `cbor:"threads"`
	V       uint64        `cbor:"v"`
}

type indexThread struct {
	Thread  string        `cbor:"thread"`
	Records []indexRecord `cbor:"records"`
}

type indexRecord struct {
	B   *link  `cbor:"b,omitempty"`   // body block; absent for an erased record
	H   link   `cbor:"h"`             // header block: its CID is the record's id
	Sig string `cbor:"sig,omitempty"` // "<did:key>:<base64>", as the log stores it
}

// bodyBlock returns the data of r's body block: the canonical CBOR map
// {"b": <body, embedded as is>, "s": <salt, byte string of 32>}.
func bodyBlock(body []byte, salt [records.SaltSize]byte) []byte {
	b := make([]byte, 0, 3+len(body)+4+len(salt))
	b = append(b, 0xa2, 0x61, 'b')
	b = append(b, body...)
	b = append(b, 0x61, 's', 0x58, 0x20)
	return append(b, salt[:]...)
}

// splitBodyBlock is bodyBlock's inverse. The body is not checked here.
func splitBodyBlock(data []byte) ([]byte, [records.SaltSize]byte, error) {
	var salt [records.SaltSize]byte
	const tail = 4 + records.SaltSize
	if len(data) < 3+1+tail || !bytes.Equal(data[:3], []byte{0xa2, 0x61, 'b'}) ||
		!bytes.Equal(data[len(data)-tail:len(data)-records.SaltSize], []byte{0x61, 's', 0x58, 0x20}) {
		return nil, salt, errors.New(`a body block is the map {"b": <body>, "s": <32-byte salt>}`)
	}
	copy(salt[:], data[len(data)-records.SaltSize:])
	return bytes.Clone(data[3 : len(data)-tail]), salt, nil
}

// Summary says what Write wrote.
type Summary struct {
	Root    []byte // the index block's CID, the CAR's one root
	Blocks  int
	Bytes   int64
	Records int // records, erased ones included
	Erased  int // records whose bodies are not in the archive
}

// Write writes threads to w as a CARv1 archive (see the package
// documentation). Every record must be whole and verify (its id, its body
// digest), and each thread must chain; Write checks what it writes as
// Read would, so it never writes an archive that Read refuses.
func Write(w io.Writer, threads []Thread) (Summary, error) {
	var sum Summary
	type blk struct{ cid, data []byte }
	var blocks []blk
	idx := index{Format: FormatName, V: Version, Threads: make([]indexThread, 0, len(threads))}
	seen := make(map[string]bool)
	for _, t := range threads {
		if seen[t.Name] {
			return sum, fmt.Errorf("archive: thread %q given twice", t.Name)
		}
		seen[t.Name] = true
		if err := checkThread(t); err != nil {
			return sum, err
		}
		it := indexThread{Thread: t.Name, Records: make([]indexRecord, 0, len(t.Records))}
		for _, r := range t.Records {
			hdr := r.Header.Encode()
			ir := indexRecord{H: link(r.ID.Bytes())}
			blocks = append(blocks, blk{r.ID.Bytes(), hdr})
			if !r.Erased() {
				data := bodyBlock(r.Body, r.Salt)
				cid := cidOf(codecCBOR, data)
				l := link(cid)
				ir.B = &l
				blocks = append(blocks, blk{cid, data})
			} else {
				sum.Erased++
			}
			if r.Sig != nil {
				ir.Sig = r.Sig.String()
			}
			it.Records = append(it.Records, ir)
			sum.Records++
		}
		idx.Threads = append(idx.Threads, it)
	}
	data, err := encMode.Marshal(idx)
	if err != nil {
		return sum, fmt.Errorf("archive: encode index: %w", err)
	}
	if len(data)+cidLen > maxSection {
		return sum, fmt.Errorf("archive: the index of %d records is %d bytes, more than a block may hold (%d): export fewer threads at a time", sum.Records, len(data), maxSection)
	}
	sum.Root = cidOf(codecDag, data)
	cw := &carWriter{w: bufio.NewWriterSize(w, 1<<16)}
	cw.header(sum.Root)
	cw.block(sum.Root, data)
	for _, b := range blocks {
		cw.block(b.cid, b.data)
	}
	sum.Blocks = 1 + len(blocks)
	err = cw.flush()
	sum.Bytes = cw.n
	if err != nil {
		return sum, fmt.Errorf("archive: write: %w", err)
	}
	return sum, nil
}

// checkThread holds a thread to the rules Read checks.
func checkThread(t Thread) error {
	if err := records.CheckThread(t.Name); err != nil {
		return fmt.Errorf("archive: thread %q: %w", t.Name, err)
	}
	erasedBy := erasuresOf(t)
	var prev records.ID
	for i, r := range t.Records {
		at := func(format string, args ...any) error {
			return fmt.Errorf("archive: thread %q, record %d (%s): %s: %w", t.Name, i, r.ID, fmt.Sprintf(format, args...), records.ErrCorrupt)
		}
		if got := r.Header.ID(); got != r.ID {
			return at("its header's id is %s", got)
		}
		if r.Header.Thread != t.Name {
			return at("it is a record of thread %q", r.Header.Thread)
		}
		if r.Header.Prev != prev {
			if prev.IsZero() {
				return at("the first record of the thread has prev %s", r.Header.Prev)
			}
			return at("its prev is %s, not the record before it, %s", r.Header.Prev, prev)
		}
		prev = r.ID
		if r.Erased() {
			h, ok := erasedBy[r.ID]
			switch {
			case !ok:
				return at("its body is not here and no later erasure record of the thread names it")
			case h.pos <= i:
				return at("its body is not here and the erasure record that names it (record %d) is not after it", h.pos)
			case h.header != r.Header:
				return at("the erasure record %d keeps another header for it", h.pos)
			}
			continue
		}
		rec := r.Record()
		if err := rec.Verify(r.ID); err != nil {
			return at("%v", err)
		}
		if err := rec.Validate(); err != nil {
			return at("%v", err)
		}
		if r.Sig != nil {
			if r.Sig.Malformed != "" || r.Sig.Key == nil {
				return at("malformed signature: %s", r.Sig.Malformed)
			}
			if err := rec.CheckSignature(); err != nil {
				return at("%v", err)
			}
		}
	}
	return nil
}

type erasedAt struct {
	pos    int
	header records.Header
}

// erasuresOf maps the records the erasure records of t name to the
// position of the first that names each, and the header it keeps.
func erasuresOf(t Thread) map[records.ID]erasedAt {
	out := make(map[records.ID]erasedAt)
	for i, r := range t.Records {
		if r.Erased() || r.Header.Kind != records.KindErasure {
			continue
		}
		er, err := records.DecodeErasure(r.Body)
		if err != nil {
			continue // Validate reports it
		}
		for _, tg := range er.Targets {
			if tg.Message() {
				continue
			}
			if _, ok := out[tg.ID]; !ok {
				out[tg.ID] = erasedAt{pos: i, header: tg.Header}
			}
		}
	}
	return out
}

// Read reads an archive from r and checks all of it before it returns
// anything: every block's CID against its data, the index, every header
// against its id, every body against its header's digest, every
// signature, each thread's chain, and that every erased record is named
// by an erasure record after it. An error says what is wrong and where
// (block index and byte offset, or thread and record position) and wraps
// ErrFormat (hence records.ErrCorrupt).
func Read(r io.Reader) (*Archive, error) {
	cr, err := NewCARReader(r)
	if err != nil {
		return nil, err
	}
	if len(cr.Roots) != 1 {
		return nil, &FormatError{Block: -1, Reason: fmt.Sprintf("%d roots; an spl archive has one, its index", len(cr.Roots))}
	}
	var blocks []Block
	byCID := make(map[string]int)
	for {
		b, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if j, ok := byCID[string(b.CID)]; ok {
			return nil, &FormatError{Block: b.Index, Offset: b.Offset, Reason: fmt.Sprintf("repeats block %d (CID %s)", j, CIDString(b.CID))}
		}
		byCID[string(b.CID)] = len(blocks)
		blocks = append(blocks, b)
	}
	a := &Archive{Root: cr.Roots[0], Blocks: len(blocks), Bytes: cr.c.off}
	ri, ok := byCID[string(a.Root)]
	if !ok {
		return nil, &FormatError{Block: -1, Reason: fmt.Sprintf("the root %s is no block of the file", CIDString(a.Root))}
	}
	root := blocks[ri]
	bad := func(b Block, format string, args ...any) error {
		return &FormatError{Block: b.Index, Offset: b.Offset, Reason: fmt.Sprintf(format, args...)}
	}
	if root.Codec != codecDag {
		return nil, bad(root, "the root is not a dag-cbor block (codec 0x%02x)", root.Codec)
	}
	var idx index
	if err := decMode.Unmarshal(root.Data, &idx); err != nil {
		return nil, bad(root, "the index does not decode: %v", err)
	}
	if re, err := encMode.Marshal(idx); err != nil || !bytes.Equal(re, root.Data) {
		return nil, bad(root, "the index is not canonical dag-cbor")
	}
	if idx.Format != FormatName || idx.V != Version {
		return nil, bad(root, "the index is format %q version %d; this reads %q version %d", idx.Format, idx.V, FormatName, Version)
	}
	used := make([]bool, len(blocks))
	used[ri] = true
	take := func(l link, what string, codec uint64) (Block, error) {
		j, ok := byCID[string(l)]
		if !ok {
			if _, err := parseCID(l); err != nil {
				return Block{}, bad(root, "%s: %v", what, err)
			}
			return Block{}, bad(root, "%s: block %s is not in the file", what, CIDString(l))
		}
		b := blocks[j]
		if used[j] {
			return Block{}, bad(b, "%s: the block is named twice by the index", what)
		}
		used[j] = true
		if b.Codec != codec {
			return Block{}, bad(b, "%s: codec 0x%02x, want 0x%02x", what, b.Codec, codec)
		}
		return b, nil
	}
	names := make(map[string]bool)
	for ti, it := range idx.Threads {
		if names[it.Thread] {
			return nil, bad(root, "thread %q is listed twice", it.Thread)
		}
		names[it.Thread] = true
		t := Thread{Name: it.Thread, Records: make([]Record, 0, len(it.Records))}
		for i, ir := range it.Records {
			what := fmt.Sprintf("thread %q (index %d), record %d", it.Thread, ti, i)
			hb, err := take(ir.H, what+" header", codecCBOR)
			if err != nil {
				return nil, err
			}
			h, err := records.DecodeHeader(hb.Data)
			if err != nil {
				return nil, bad(hb, "%s header: %v", what, err)
			}
			if !bytes.Equal(h.Encode(), hb.Data) {
				return nil, bad(hb, "%s header: not canonical", what)
			}
			rec := Record{Header: h, ID: records.ID(hb.Digest())}
			if ir.B != nil {
				bb, err := take(*ir.B, what+" body", codecCBOR)
				if err != nil {
					return nil, err
				}
				body, salt, err := splitBodyBlock(bb.Data)
				if err != nil {
					return nil, bad(bb, "%s body: %v", what, err)
				}
				env, err := (&records.Record{Header: h, Salt: salt, Body: body}).Marshal()
				if err == nil {
					_, err = records.Unmarshal(env)
				}
				if err != nil {
					return nil, bad(bb, "%s body: %v", what, err)
				}
				rec.Body, rec.Salt = body, salt
			}
			if ir.Sig != "" {
				s, err := records.ParseSignature(ir.Sig)
				if err != nil {
					return nil, bad(root, "%s signature: %v", what, err)
				}
				rec.Sig = s
			}
			t.Records = append(t.Records, rec)
		}
		if err := checkThread(t); err != nil {
			return nil, fmt.Errorf("%w: %w", err, ErrFormat)
		}
		a.Threads = append(a.Threads, t)
	}
	for j, u := range used {
		if !u {
			return nil, bad(blocks[j], "the index does not name the block (CID %s)", CIDString(blocks[j].CID))
		}
	}
	return a, nil
}
