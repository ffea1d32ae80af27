package log

import (
	"context"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/spl-dev/spl/records"
)

// Compression of stored bodies.
//
// A body of CompressMin bytes or more is stored as a zstd frame when that
// saves an eighth of it at least: in the record's message when the
// stored envelope then fits one (records.MarshalStored, "z" a byte
// string), else beside the log in parts (bodies.go, "z" the frame's
// length). The id and the body digest are over the canonical body, so
// nothing a reader verifies changes: every read decompresses, into at
// most the length the envelope gives, and verifies the body it gets.

// CompressMin is the smallest body the log stores compressed, in bytes:
// under it, zstd's frame and the time it takes are not worth the bytes it
// saves.
const CompressMin = 4 << 10

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	// zdec decodes into at most the capacity it is given: a frame that
	// would decode to more than its envelope says is corrupt, not a
	// reason to allocate.
	zdec, _ = zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(0))
)

// compress returns body's zstd frame, or nil when body is short or does
// not compress by an eighth.
func compress(body []byte) []byte {
	if len(body) < CompressMin {
		return nil
	}
	z := zenc.EncodeAll(body, make([]byte, 0, len(body)/2))
	if len(z) > len(body)-len(body)/8 {
		return nil
	}
	return z
}

// decompress returns the body of size bytes whose zstd frame is z; what
// is no such frame is an error wrapping records.ErrCorrupt.
func decompress(z []byte, size int) ([]byte, error) {
	body, err := zdec.DecodeAll(z, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("compressed body: %v: %w", err, records.ErrCorrupt)
	}
	if len(body) != size {
		return nil, fmt.Errorf("compressed body: %d bytes, the envelope says %d: %w", len(body), size, records.ErrCorrupt)
	}
	return body, nil
}

// unpack returns the record of a stored envelope that is not the plain
// one: its body decompressed, or fetched from beside the log (and
// decompressed), and attached. Errors that say the envelope or its body
// is not what it should be wrap records.ErrCorrupt; others (the server
// did not answer) do not.
func (l *Log) unpack(ctx context.Context, data []byte) (*records.Record, error) {
	rec, st, err := records.UnmarshalStored(data)
	if err != nil {
		return nil, err
	}
	var body []byte
	switch {
	case !st.Outside:
		body, err = decompress(st.Z, st.Size)
	case st.ZSize > 0:
		if body, err = l.bodies.get(ctx, rec.Header.BD, st.ZSize); err == nil {
			body, err = decompress(body, st.Size)
		}
	default:
		body, err = l.bodies.get(ctx, rec.Header.BD, st.Size)
	}
	if err == nil {
		err = rec.AttachBody(body, st.Size)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// pack decides how rec, valid and sealed or about to be (n bytes encoded
// once chained), is stored: plain when it fits a message and its body is
// short or does not compress (packed false), else compressed in its
// message, or with its body (compressed when that pays) beside the log,
// stored durably here first. A door log stores nothing: its body, when
// the record does not fit a message, goes to the server as is
// (door.putBody), which decides for itself.
func (l *Log) pack(ctx context.Context, rec *records.Record, n int) (st records.Stored, packed bool, err error) {
	if err := l.checkSize(n); err != nil {
		return st, false, err
	}
	if l.door != nil {
		if n <= records.MaxEncodedSize {
			return st, false, nil
		}
		return records.Stored{Size: len(rec.Body), Outside: true}, true, l.door.putBody(ctx, rec)
	}
	z := compress(rec.Body)
	switch {
	case z != nil && rec.WithPrev(placeholderPrev).StoredSize(len(z)) <= records.MaxEncodedSize:
		return records.Stored{Size: len(rec.Body), Z: z}, true, nil
	case z != nil:
		st = records.Stored{Size: len(rec.Body), Outside: true, ZSize: len(z)}
		return st, true, l.bodies.put(ctx, rec.Header.BD, z)
	case n <= records.MaxEncodedSize:
		return st, false, nil
	}
	return records.Stored{Size: len(rec.Body), Outside: true}, true, l.bodies.put(ctx, rec.Header.BD, rec.Body)
}
