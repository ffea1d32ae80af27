package natsio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoBlob reports a blob that the bucket does not hold.
var ErrNoBlob = errors.New("spl/natsio: no such blob")

// ErrBlobExists reports a put under a name that holds other bytes: a
// blob, once stored, is never replaced.
var ErrBlobExists = errors.New("spl/natsio: a different blob is stored under that name")

// Blobs is a JetStream object store bucket that holds payloads too large
// for a record, by name. It knows nothing of what names mean: the caller
// names a blob by its digest and checks it on read.
type Blobs struct {
	c        *Conn
	bucket   string
	replicas int

	mu    sync.Mutex
	store jetstream.ObjectStore
	sync  *BlockSyncer // the embedded store's fsync of the bucket's stream; nil on a server
}

// Blobs returns the object store bucket named bucket, created with
// replicas on first use (a put), bound on first read.
func (c *Conn) Blobs(bucket string, replicas int) *Blobs {
	if replicas < 1 {
		replicas = 1
	}
	return &Blobs{c: c, bucket: bucket, replicas: replicas}
}

func (b *Blobs) open(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store != nil {
		return b.store, nil
	}
	s, err := b.c.JS.ObjectStore(ctx, b.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		s, err = b.c.JS.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      b.bucket,
			Description: "spl: payloads too large for a record, content-addressed",
			Storage:     jetstream.FileStorage,
			Replicas:    b.replicas,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", b.bucket, err)
	}
	if b.c.SelfSync() {
		// The server does not fsync (see BlockSyncer): a put is durable
		// once the bucket's blocks are synced.
		b.sync = NewBlockSyncer(b.c.StoreDir(), "OBJ_"+b.bucket)
	}
	b.store = s
	return s, nil
}

// Put stores data under name and returns once it is durable (fsynced on
// the embedded server). A blob already stored under name with the same
// bytes (size and SHA-256, as the bucket keeps them) is left as it is;
// one with other bytes is refused with ErrBlobExists.
func (b *Blobs) Put(ctx context.Context, name string, data []byte) error {
	s, err := b.open(ctx, true)
	if err != nil {
		return err
	}
	if info, err := s.GetInfo(ctx, name); err == nil {
		h := sha256.New()
		h.Write(data)
		if info.Size == uint64(len(data)) && info.Digest == jetstream.GetObjectDigestValue(h) {
			return nil
		}
		return fmt.Errorf("put blob %s: %w", name, ErrBlobExists)
	}
	if _, err := s.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("put blob %s: %w", name, err)
	}
	if b.sync != nil {
		if err := b.sync.SyncAll(); err != nil {
			return fmt.Errorf("put blob %s: %w", name, err)
		}
	}
	return nil
}

// Get returns the bytes stored under name, or an error wrapping ErrNoBlob.
func (b *Blobs) Get(ctx context.Context, name string) ([]byte, error) {
	s, err := b.open(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("blob %s: %w", name, ErrNoBlob)
	}
	if err != nil {
		return nil, err
	}
	data, err := s.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("blob %s: %w", name, ErrNoBlob)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", name, err)
	}
	return bytes.Clone(data), nil
}

// Delete removes the blob stored under name: its chunks are purged from
// the bucket's stream. A blob that is not there is no error.
func (b *Blobs) Delete(ctx context.Context, name string) error {
	s, err := b.open(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete blob %s: %w", name, err)
	}
	if b.sync != nil {
		if err := b.sync.SyncAll(); err != nil {
			return fmt.Errorf("delete blob %s: %w", name, err)
		}
	}
	return nil
}
