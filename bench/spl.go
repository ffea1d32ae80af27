package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/internal/natsio"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/storekey"
)

// splPeer is spl itself: the sdk on the embedded log, default durability
// (fsync before every ack), in this process.
type splPeer struct {
	root      string
	encrypted bool // the store is encrypted at rest (newEncryptedPeer)
}

var _ Peer = (*splPeer)(nil)

// newEncryptedPeer is spl with its stores encrypted at rest, as a user
// encrypts them: a key file beside the data directories, named by
// SPL_ENCRYPTION_KEY_FILE, which every open in this worker process reads
// (the sdk's and the scan's alike). The key is made by the first worker
// and kept for the others.
func newEncryptedPeer(root string) (*splPeer, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	key := filepath.Join(root, "store.key")
	if err := storekey.Create(key); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := os.Setenv(env.EncryptionKeyFileVar, key); err != nil {
		return nil, err
	}
	return &splPeer{root: root, encrypted: true}, nil
}

// Name implements Peer.
func (p *splPeer) Name() string {
	if p.encrypted {
		return "spl-encrypted"
	}
	return "spl"
}

func (p *splPeer) dir(loc string) string { return filepath.Join(p.root, loc) }

// open opens the sdk client on loc with the harness's options: an actor,
// and no linger on close (no other process joins a benchmark store).
func (p *splPeer) open(ctx context.Context, loc string) (*sdk.Client, error) {
	c, err := sdk.Open(ctx, sdk.WithDir(p.dir(loc)), sdk.WithActor(actor))
	if err != nil {
		return nil, fmt.Errorf("open spl store %s: %w", loc, err)
	}
	return c, nil
}

// Open implements Peer.
func (p *splPeer) Open(ctx context.Context, loc string) (Store, error) {
	c, err := p.open(ctx, loc)
	if err != nil {
		return nil, err
	}
	return &splStore{c: c, dir: p.dir(loc)}, nil
}

// Fill implements Peer: EmitAsync of every record in plan order, then one
// Flush, at default durability (group commits, each fsynced).
func (p *splPeer) Fill(ctx context.Context, loc string, plan *Plan) error {
	c, err := p.open(ctx, loc)
	if err != nil {
		return err
	}
	for i := range plan.Records {
		cp := content(i, int(plan.Step[i]))
		ev := sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: threadName(int(plan.Thread[i])), Body: &cp}
		if _, err := c.EmitAsync(ctx, ev); err != nil {
			c.Close()
			return fmt.Errorf("fill record %d: %w", i, err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		c.Close()
		return fmt.Errorf("fill: flush: %w", err)
	}
	// Bring the thread index up to the end of the log, as a running
	// projector would have kept it.
	rt, err := c.NewProjector(ctx, projections.Index(), projections.Options{})
	if err == nil {
		err = rt.CatchUp(ctx, math.MaxUint64)
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("fill: thread index: %w", err)
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("fill: close: %w", err)
	}
	return nil
}

// ColdOpen implements Peer: open the client (which starts the embedded
// server and recovers the stream) and read one latest checkpoint.
func (p *splPeer) ColdOpen(ctx context.Context, loc, probe string) (Store, time.Duration, error) {
	t0 := time.Now()
	c, err := p.open(ctx, loc)
	if err != nil {
		return nil, 0, err
	}
	st := &splStore{c: c, dir: p.dir(loc)}
	if _, err := st.Latest(ctx, probe); err != nil {
		st.Close()
		return nil, 0, fmt.Errorf("first read: %w", err)
	}
	return st, time.Since(t0), nil
}

// DiskBytes implements Peer: the JetStream store directory.
func (p *splPeer) DiskBytes(_ context.Context, loc string) (int64, string, error) {
	n, err := du(filepath.Join(p.dir(loc), "jetstream"))
	return n, "du of the data directory's jetstream/ (message blocks and their indexes)", err
}

// Remove implements Peer.
func (p *splPeer) Remove(_ context.Context, loc string) error { return os.RemoveAll(p.dir(loc)) }

// splStore is an open spl client, with the thread index projection's
// runtime and reader made on first use.
type splStore struct {
	c   *sdk.Client
	dir string // the data directory
	rt  *projections.Runtime
	rd  *projections.Reader
}

var (
	_ AsyncStore      = (*splStore)(nil)
	_ VerifiedScanner = (*splStore)(nil)
)

// Save implements Store: SaveCheckpoint, which returns once the record is
// durable.
func (s *splStore) Save(ctx context.Context, _ int, thread string, c *records.Checkpoint) error {
	_, err := s.c.SaveCheckpoint(ctx, thread, "", *c)
	return err
}

// SaveAsync implements AsyncStore: EmitAsync, then one Flush.
func (s *splStore) SaveAsync(ctx context.Context, items []WriteItem, max int, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	n := 0
	for ; n < max && (n%256 != 0 || time.Now().Before(deadline)); n++ {
		it := items[n%len(items)]
		ev := sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: it.Thread, Body: it.Content}
		if _, err := s.c.EmitAsync(ctx, ev); err != nil {
			return n, fmt.Errorf("emit async %d: %w", n, err)
		}
	}
	if err := s.c.Flush(ctx); err != nil {
		return n, fmt.Errorf("flush: %w", err)
	}
	return n, nil
}

// Latest implements Store: LatestCheckpoint (one last-by-subject get,
// decoded and verified).
func (s *splStore) Latest(ctx context.Context, thread string) (*records.Checkpoint, error) {
	sc, err := s.c.LatestCheckpoint(ctx, thread)
	if err != nil {
		return nil, err
	}
	return sc.Checkpoint, nil
}

// Last implements Store: QueryThread with Last(n).
func (s *splStore) Last(ctx context.Context, thread string, n int) (int, error) {
	got := 0
	for _, err := range s.c.QueryThread(ctx, thread, sdk.Last(n)) {
		if err != nil {
			return got, err
		}
		got++
	}
	return got, nil
}

// Recent implements Store: the thread index projection's Threads (a read
// of its KV bucket's newest values).
func (s *splStore) Recent(ctx context.Context, n int) ([]string, error) {
	if s.rd == nil {
		s.rd = s.c.IndexReader()
	}
	ts, err := s.rd.Threads(ctx, projections.ThreadFilter{Limit: n})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Thread
	}
	return out, nil
}

// Scan implements Store: a rebuild of the thread index projection (its
// read models emptied, the whole log applied again and stored).
func (s *splStore) Scan(ctx context.Context) (int, error) {
	if s.rt == nil {
		rt, err := s.c.NewProjector(ctx, projections.Index(), projections.Options{})
		if err != nil {
			return 0, fmt.Errorf("thread index: %w", err)
		}
		s.rt = rt
	}
	var done uint64
	err := s.rt.Rebuild(ctx, func(d, _ uint64) { done = d })
	return int(done), err
}

// VerifiedScan implements VerifiedScanner: every record through an ordered
// consumer, decoded and verified (envelope, body digest, id, subject), with
// no fold and nothing stored: the ceiling of a rebuild.
func (s *splStore) VerifiedScan(ctx context.Context) (int, error) {
	// A connection of its own, joined to the client's embedded server:
	// the raw consumer is the harness's, not the client's.
	conn, err := natsio.Dial(ctx, natsio.Options{Dir: s.dir, Name: "bench-scan"})
	if err != nil {
		return 0, fmt.Errorf("scan: %w", err)
	}
	defer conn.Close()
	l, err := splog.On(ctx, conn, splog.Options{Stream: s.c.StreamName(), NoDoor: true, NoMark: true})
	if err != nil {
		return 0, fmt.Errorf("scan: %w", err)
	}
	defer l.Close()
	var bad error
	n, err := scanStream(ctx, conn.JS, s.c.StreamName(), func(subject string, seq uint64, hdr nats.Header, data []byte) {
		if _, err := l.DecodeMessage(subject, seq, hdr, data); err != nil && bad == nil {
			bad = err
		}
	})
	if err == nil && bad != nil {
		err = fmt.Errorf("scan: %w", bad)
	}
	return n, err
}

// Close implements Store.
func (s *splStore) Close() error {
	if err := s.c.Close(); err != nil && !errors.Is(err, sdk.ErrClosed) {
		return err
	}
	return nil
}
