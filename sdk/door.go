package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/spl-dev/spl/internal/natsio"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// The service layer's side of spl serve's door (log/door.go): what the
// server does with the records, erasures and blobs a door client sends.
// A door client has run the seal path itself (redaction, signing); the
// server runs it again on what it receives, because the client is not
// trusted to have: a record that passes it is stored, one that does not
// is refused with the error an embedded write would get.

func init() {
	splog.RegisterDoorError("needs_admin", ErrNeedsAdmin)
	splog.RegisterDoorError("blob_exists", ErrBlobExists)
}

// ErrBlobExists reports a blob put under a name that holds other bytes:
// a blob, once stored, is never replaced (natsio.ErrBlobExists).
var ErrBlobExists = natsio.ErrBlobExists

// SubmitRecord is the door's append: rec, a record a client built and
// sealed elsewhere and sent unchained, passes the seal path (redaction,
// who may write its thread, signatures) and is handed to the log,
// conditional on its thread being at clock after when cond. It returns
// the pending append and the record handed to the log, which differs from
// rec when a redaction policy took values out.
func (c *Client) SubmitRecord(ctx context.Context, rec *records.Record, cond bool, after uint64) (*splog.Pending, *records.Record, error) {
	if c.isClosing() {
		return nil, nil, ErrClosed
	}
	if !rec.Header.Prev.IsZero() {
		return nil, nil, &records.FieldError{Field: "prev", Rule: "the door takes records unchained: the log sets prev"}
	}
	if err := rec.Validate(); err != nil {
		return nil, nil, err
	}
	sealed, err := c.seal(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	// Its client retries a lost race itself (log.SubmitOnce).
	p, err := c.log.SubmitOnce(ctx, sealed, cond, after)
	if err != nil {
		return nil, nil, err
	}
	return p, sealed, nil
}

// EraseRecord is the door's erasure: rec is an erasure record a client
// planned and sealed (unchained). Who may write its thread and the
// signature rules hold as for every record; the log checks that its
// targets are still, as it names them, records of its thread that no
// erasure has erased (else log.ErrMoved: plan again). The blobs of runs
// the erased records name are deleted with them.
func (c *Client) EraseRecord(ctx context.Context, rec *records.Record, cond bool, after uint64) (splog.EraseResult, error) {
	if c.isClosing() {
		return splog.EraseResult{}, ErrClosed
	}
	er, err := records.DecodeErasure(rec.Body)
	if err != nil {
		return splog.EraseResult{}, err
	}
	var ids []records.ID
	for _, t := range er.Targets {
		if !t.Message() {
			ids = append(ids, t.ID)
		}
	}
	blobs := c.runBlobs(ctx, rec.Header.Thread, ids)
	opts := []splog.EraseOption{splog.EraseSealed(func(r *records.Record) (*records.Record, error) { return c.admit(ctx, r) })}
	if cond {
		opts = append(opts, splog.EraseAfter(after))
	}
	res, err := c.log.EraseRecord(ctx, rec, opts...)
	if berr := c.eraseBlobs(ctx, blobs, res.Erased); berr != nil {
		err = errors.Join(err, fmt.Errorf("erase: %w", berr))
	}
	return res, err
}

// PutBlob is the door's blob put: data stored under name in bucket, the
// run payloads' (BlobBucket). A name that holds the same bytes already is
// left as it is; one that holds other bytes is refused (ErrBlobExists).
func (c *Client) PutBlob(ctx context.Context, bucket, name string, data []byte) error {
	if bucket != BlobBucket {
		return &records.FieldError{Field: "bucket", Rule: fmt.Sprintf("blobs are kept in %s, not %q", BlobBucket, bucket)}
	}
	if err := checkBlobName(name); err != nil {
		return err
	}
	return c.blobs().Put(ctx, name, data)
}

// GetBlob is the door's blob read: the bytes stored under name in
// bucket, or an error wrapping ErrNotFound.
func (c *Client) GetBlob(ctx context.Context, bucket, name string) ([]byte, error) {
	if bucket != BlobBucket {
		return nil, &records.FieldError{Field: "bucket", Rule: fmt.Sprintf("blobs are kept in %s, not %q", BlobBucket, bucket)}
	}
	if err := checkBlobName(name); err != nil {
		return nil, err
	}
	data, err := c.blobs().Get(ctx, name)
	if errors.Is(err, natsio.ErrNoBlob) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return data, err
}

// checkBlobName refuses a name that is no blob digest: 64 hex digits.
func checkBlobName(name string) error {
	if len(name) != 64 {
		return &records.FieldError{Field: "name", Rule: "a blob's name is its digest: 64 hex digits"}
	}
	for _, r := range name {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return &records.FieldError{Field: "name", Rule: "a blob's name is its digest: 64 lower-case hex digits"}
		}
	}
	return nil
}

// doorBlobs is the blob bucket of a door client: puts and reads go through
// spl serve's door, in parts.
type doorBlobs struct {
	l *splog.Log
}

func (b doorBlobs) Put(ctx context.Context, name string, data []byte) error {
	if err := b.l.DoorPut(ctx, BlobBucket, name, data); err != nil {
		return fmt.Errorf("put blob %s: %w", name, err)
	}
	return nil
}

func (b doorBlobs) Get(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	for {
		rep, err := b.l.DoorCall(ctx, splog.DoorBlobGet, splog.DoorBlobRequest{Bucket: BlobBucket, Name: name, Offset: int64(len(data))})
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("blob %s: %w", name, natsio.ErrNoBlob)
			}
			return nil, fmt.Errorf("get blob %s: %w", name, err)
		}
		data = append(data, rep.Data...)
		if int64(len(data)) >= rep.Size || len(rep.Data) == 0 {
			if int64(len(data)) != rep.Size {
				return nil, fmt.Errorf("get blob %s: %d bytes of %d came", name, len(data), rep.Size)
			}
			return data, nil
		}
	}
}

func (b doorBlobs) Delete(context.Context, string) error {
	// A door client's erasures delete their blobs on the server
	// (EraseRecord); nothing else deletes one.
	return fmt.Errorf("delete blob: %w: blobs go with the records that name them", ErrForbidden)
}
