package archive

import (
	"bufio"
	"bytes"
	"encoding/base32"
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"

	"github.com/spl-dev/spl/records"
)

// CID and multicodec numbers of the blocks an archive holds. Each is a
// one-byte unsigned varint.
const (
	cidV1      = 0x01
	codecCBOR  = 0x51 // cbor: record headers and bodies
	codecDag   = 0x71 // dag-cbor: the index, whose links IPLD tools follow
	mhBLAKE3   = 0x1e // multihash blake3
	mhLen      = 0x20 // 32-byte digest
	cidLen     = 4 + 32
	tagCIDLink = 42 // the dag-cbor tag of a CID link
)

// Bounds on what a reader accepts, so that bad input cannot make it
// allocate or loop without end.
const (
	maxHeader  = 1 << 16  // the CAR header: a map of one root
	maxSection = 64 << 20 // one block, CID included (the index of a large export is the largest)
)

// ErrFormat is wrapped by every error about an archive's bytes: not a
// CARv1, truncated, a block whose CID does not match its data, an index
// that does not hold. It wraps records.ErrCorrupt too.
var ErrFormat = fmt.Errorf("spl/archive: bad archive: %w", records.ErrCorrupt)

// FormatError says what is wrong with an archive and where: the block
// (0 is the first after the CAR header; -1 is the header itself) and
// the byte offset at which its section starts.
type FormatError struct {
	Block  int
	Offset int64
	Reason string
}

func (e *FormatError) Error() string {
	if e.Block < 0 {
		return fmt.Sprintf("archive header at byte %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("archive block %d at byte %d: %s", e.Block, e.Offset, e.Reason)
}

// Unwrap returns ErrFormat.
func (e *FormatError) Unwrap() error { return ErrFormat }

// cidOf returns the binary CIDv1 of data: codec, BLAKE3-256.
func cidOf(codec byte, data []byte) []byte {
	d := blake3.Sum256(data)
	return append([]byte{cidV1, codec, mhBLAKE3, mhLen}, d[:]...)
}

var base32Lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// CIDString is the text form of a binary CID: multibase 'b', lower-case
// base32 without padding (a record's id prints the same way).
func CIDString(cid []byte) string { return "b" + base32Lower.EncodeToString(cid) }

// encMode is RFC 8949 core deterministic encoding, which for the maps an
// archive holds (text keys, no floats) is also dag-cbor's canonical form.
var encMode = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic("spl/archive: encoding options: " + err.Error())
	}
	return m
}()

// decMode decodes the CAR header and the index strictly: no duplicate
// keys, definite lengths, valid UTF-8, unknown struct fields refused.
var decMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsAllowed,
		UTF8:              cbor.UTF8RejectInvalid,
		MaxNestedLevels:   8,
		MaxArrayElements:  1 << 24,
		MaxMapPairs:       1 << 10,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic("spl/archive: decoding options: " + err.Error())
	}
	return m
}()

// link is a CID link of dag-cbor: tag 42 around the byte string 0x00
// (the identity multibase) followed by the binary CID.
type link []byte

func (l link) MarshalCBOR() ([]byte, error) {
	return encMode.Marshal(cbor.Tag{Number: tagCIDLink, Content: append([]byte{0}, l...)})
}

func (l *link) UnmarshalCBOR(data []byte) error {
	var t cbor.RawTag
	if err := t.UnmarshalCBOR(data); err != nil {
		return err
	}
	if t.Number != tagCIDLink {
		return fmt.Errorf("tag %d is not a CID link (42)", t.Number)
	}
	var b []byte
	if err := decMode.Unmarshal(t.Content, &b); err != nil {
		return fmt.Errorf("CID link: %w", err)
	}
	if len(b) == 0 || b[0] != 0 {
		return errors.New("CID link: must start with the identity multibase 0x00")
	}
	*l = link(bytes.Clone(b[1:]))
	return nil
}

// carHeader is the CARv1 header.
type carHeader struct {
	Roots   []link `cbor:"roots"`
	Version uint64 `cbor:"version"`
}

// appendUvarint appends v as an unsigned varint (multiformats: LEB128).
func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// carWriter writes a CARv1 stream.
type carWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *carWriter) section(parts ...[]byte) {
	if c.err != nil {
		return
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	head := appendUvarint(nil, uint64(n))
	for _, p := range append([][]byte{head}, parts...) {
		k, err := c.w.Write(p)
		c.n += int64(k)
		if err != nil {
			c.err = err
			return
		}
	}
}

// header writes the CAR header with roots.
func (c *carWriter) header(roots ...[]byte) {
	h := carHeader{Version: 1}
	for _, r := range roots {
		h.Roots = append(h.Roots, link(r))
	}
	data, err := encMode.Marshal(h)
	if err != nil {
		c.err = fmt.Errorf("encode CAR header: %w", err)
		return
	}
	c.section(data)
}

// block writes one block: its CID, then its data.
func (c *carWriter) block(cid, data []byte) { c.section(cid, data) }

func (c *carWriter) flush() error {
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.err
}

// Block is one block of a CAR file, its CID checked against its data.
type Block struct {
	CID    []byte // binary CIDv1
	Codec  uint64 // the CID's multicodec: 0x51 cbor, 0x71 dag-cbor
	Data   []byte
	Index  int   // 0 for the first block after the header
	Offset int64 // byte offset of the block's section (its length varint)
}

// Digest returns the 32-byte BLAKE3 digest the block's CID carries.
func (b Block) Digest() [32]byte {
	var d [32]byte
	copy(d[:], b.CID[len(b.CID)-32:])
	return d
}

// countingReader reads bytes one varint at a time and counts them.
type countingReader struct {
	r   *bufio.Reader
	off int64
}

// uvarint reads an unsigned varint in its minimal form (at most 9 bytes,
// as multiformats requires). At the end of input it returns io.EOF when
// no byte was read, io.ErrUnexpectedEOF when some were.
func (c *countingReader) uvarint() (uint64, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		b, err := c.r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		c.off++
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, errors.New("varint not in its minimal form")
			}
			return v, nil
		}
	}
	return 0, errors.New("varint longer than 9 bytes")
}

// read reads exactly n bytes, growing its buffer only as data comes, so a
// length that promises more than the input holds costs no more memory
// than the input.
func (c *countingReader) read(n uint64) ([]byte, error) {
	var buf bytes.Buffer
	k, err := io.Copy(&buf, io.LimitReader(c.r, int64(n)))
	c.off += k
	if err != nil {
		return nil, err
	}
	if uint64(k) != n {
		return nil, io.ErrUnexpectedEOF
	}
	return buf.Bytes(), nil
}

// CARReader reads a CARv1 stream block by block and checks every block's
// CID against its data. It reads only CIDv1 blocks hashed with
// BLAKE3-256, the only ones an spl archive holds.
type CARReader struct {
	c     countingReader
	Roots [][]byte // the header's roots
	next  int
}

// NewCARReader reads the CAR header from r.
func NewCARReader(r io.Reader) (*CARReader, error) {
	cr := &CARReader{c: countingReader{r: bufio.NewReader(r)}}
	bad := func(format string, args ...any) error {
		return &FormatError{Block: -1, Offset: 0, Reason: fmt.Sprintf(format, args...)}
	}
	n, err := cr.c.uvarint()
	switch {
	case err == io.EOF:
		return nil, bad("empty file: not a CAR archive")
	case err != nil:
		return nil, bad("header length: %v", err)
	case n == 0 || n > maxHeader:
		return nil, bad("header length %d is out of range (1 to %d): not a CAR archive", n, maxHeader)
	}
	data, err := cr.c.read(n)
	if err != nil {
		return nil, bad("truncated: the header says %d bytes: %v", n, err)
	}
	var h carHeader
	if err := decMode.Unmarshal(data, &h); err != nil {
		var v struct {
			Version uint64 `cbor:"version"`
		}
		if cbor.Unmarshal(data, &v) == nil && v.Version == 2 {
			return nil, bad("a CARv2 file; only CARv1 is read (car inspect/convert makes one)")
		}
		return nil, bad("not a CARv1 header (a dag-cbor map of roots and version): %v", err)
	}
	if h.Version == 2 {
		return nil, bad("a CARv2 file; only CARv1 is read (car inspect/convert makes one)")
	}
	if h.Version != 1 {
		return nil, bad("CAR version %d; only version 1 is read", h.Version)
	}
	for i, root := range h.Roots {
		if _, err := parseCID(root); err != nil {
			return nil, bad("root %d: %v", i, err)
		}
		cr.Roots = append(cr.Roots, root)
	}
	if re, err := encMode.Marshal(h); err != nil || !bytes.Equal(re, data) {
		return nil, bad("header is not canonical dag-cbor")
	}
	return cr, nil
}

// parseCID checks that cid is a CIDv1 with a 32-byte BLAKE3 multihash and
// returns its codec.
func parseCID(cid []byte) (uint64, error) {
	switch {
	case len(cid) >= 2 && cid[0] == 0x12 && cid[1] == 0x20:
		return 0, errors.New("a CIDv0 (sha2-256); an spl archive holds CIDv1 blocks hashed with BLAKE3-256")
	case len(cid) < 4:
		return 0, fmt.Errorf("CID of %d bytes is too short", len(cid))
	case cid[0] != cidV1:
		return 0, fmt.Errorf("CID version 0x%02x; want 1", cid[0])
	case cid[1] >= 0x80:
		return 0, fmt.Errorf("multicodec 0x%02x… is none an spl archive holds (0x51 cbor, 0x71 dag-cbor)", cid[1])
	case cid[2] != mhBLAKE3 || cid[3] != mhLen:
		return 0, fmt.Errorf("multihash 0x%02x of length %d; an spl archive holds BLAKE3-256 (0x1e, 32) only", cid[2], cid[3])
	case len(cid) != cidLen:
		return 0, fmt.Errorf("CID of %d bytes; a BLAKE3-256 CIDv1 has %d", len(cid), cidLen)
	}
	return uint64(cid[1]), nil
}

// Next returns the next block, its CID checked, or io.EOF after the last.
func (cr *CARReader) Next() (Block, error) {
	off := cr.c.off
	i := cr.next
	bad := func(format string, args ...any) error {
		return &FormatError{Block: i, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	n, err := cr.c.uvarint()
	switch {
	case err == io.EOF:
		return Block{}, io.EOF
	case err == io.ErrUnexpectedEOF:
		return Block{}, bad("truncated: the file ends inside the block's length")
	case err != nil:
		return Block{}, bad("block length: %v", err)
	case n == 0:
		return Block{}, bad("block of length 0")
	case n > maxSection:
		return Block{}, bad("block of %d bytes; at most %d are read", n, maxSection)
	case n < cidLen:
		return Block{}, bad("block of %d bytes is shorter than its CID", n)
	}
	sec, err := cr.c.read(n)
	if err != nil {
		return Block{}, bad("truncated: the block says %d bytes, the file ends before (%v)", n, err)
	}
	cid, data := sec[:cidLen], sec[cidLen:]
	codec, err := parseCID(cid)
	if err != nil {
		return Block{}, bad("%v", err)
	}
	if d := blake3.Sum256(data); !bytes.Equal(d[:], cid[4:]) {
		return Block{}, bad("CID %s does not match its data (BLAKE3-256 of the data is %x)", CIDString(cid), d)
	}
	cr.next++
	return Block{CID: bytes.Clone(cid), Codec: codec, Data: data, Index: i, Offset: off}, nil
}
