package log

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// Bodies kept outside.
//
// A record whose envelope is over records.MaxEncodedSize does not fit a
// message of the log's stream. Its body goes first to a stream of its
// own, <Stream>_BODIES, in parts of BodyPart bytes on the subject
// spl.body.<bd in hex> (bd is the record's salted body digest: unique to
// the record, and telling nothing of the body). Once every part is
// stored, and durable, the record is appended as records.MarshalOutside
// writes it: header, body length and salt. A read fetches the parts,
// attaches the body and verifies the record as any other, so the id and
// the body digest are those of the whole record; an erasure securely
// deletes the parts with the record's message. Parts stored by a process
// that died before its append are no record's body: nothing reads them.

// BodySubjectPrefix is the first two tokens of the subjects of bodies
// kept outside.
const BodySubjectPrefix = "spl.body"

// BodyPart is the size of one part of a body kept outside, in bytes: well
// under the largest message a server takes.
const BodyPart = 512 << 10

// DefaultMaxRecord is the largest record a log takes unless
// Options.MaxRecord says otherwise: 64 MiB encoded.
const DefaultMaxRecord = 64 << 20

// Headers of a part of a body kept outside.
const (
	hdrPartOffset = "Spl-Part-Offset" // where the part starts in the body
	hdrPartSize   = "Spl-Body-Size"   // the whole body's length
)

// BodySubject is the subject of the parts of the body whose digest is bd.
func BodySubject(bd [32]byte) string {
	return BodySubjectPrefix + "." + hex.EncodeToString(bd[:])
}

// BodyStreamConfig is the configuration of the stream of bodies kept
// outside for the log stream named stream.
func BodyStreamConfig(stream string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        stream + "_BODIES",
		Description: "spl: bodies of records too large for one message, in parts, by body digest",
		Subjects:    []string{BodySubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Replicas:    replicas,
		MaxMsgSize:  BodyPart + 64<<10,
		AllowDirect: true,
	}
}

// bodyStore is the log's stream of bodies kept outside, bound on first
// use: created by the first put, looked up by reads.
type bodyStore struct {
	l *Log

	mu     sync.Mutex
	stream jetstream.Stream
	blocks *natsio.BlockSyncer // the embedded store's fsync of the stream; nil on a server
}

// name is the bodies' stream name.
func (b *bodyStore) name() string { return b.l.opts.Stream + "_BODIES" }

// bind returns the stream, creating it when create is set; without it a
// missing stream is (nil, nil).
func (b *bodyStore) bind(ctx context.Context, create bool) (jetstream.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stream != nil {
		return b.stream, nil
	}
	want := BodyStreamConfig(b.l.opts.Stream, b.l.opts.Replicas)
	s, err := b.l.c.JS.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !create {
			return nil, nil
		}
		s, err = b.l.c.JS.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = b.l.c.JS.Stream(ctx, want.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", want.Name, err)
	}
	if ch := StreamChanges(s.CachedInfo().Config, want); len(ch) > 0 {
		return nil, streamChanged(want.Name, ch)
	}
	if b.l.c.SelfSync() && !b.l.opts.NoSync {
		b.blocks = natsio.NewBlockSyncer(b.l.c.StoreDir(), want.Name)
	}
	b.stream = s
	return s, nil
}

// put stores body, the body of a record whose digest is bd, and returns
// once every part is stored and durable. Parts that a put of the same
// body stored before (a retry) are found on read; the server drops the
// copies sent within its duplicate window.
func (b *bodyStore) put(ctx context.Context, bd [32]byte, body []byte) error {
	ctx, cancel := b.l.c.UntilAnswered(ctx, b.l.opts.Timeout+timeoutPerMiB(len(body)))
	defer cancel()
	if _, err := b.bind(ctx, true); err != nil {
		return fmt.Errorf("put body: %w", err)
	}
	if err := b.l.c.CheckRoom(len(body)); err != nil {
		return err
	}
	subject, total := BodySubject(bd), strconv.Itoa(len(body))
	id := hex.EncodeToString(bd[:8])
	acks := make([]jetstream.PubAckFuture, 0, len(body)/BodyPart+1)
	for off := 0; off < len(body) || off == 0; off += BodyPart {
		end := min(off+BodyPart, len(body))
		m := nats.NewMsg(subject)
		m.Header.Set(hdrPartOffset, strconv.Itoa(off))
		m.Header.Set(hdrPartSize, total)
		m.Header.Set(jetstream.MsgIDHeader, id+"."+strconv.Itoa(off))
		m.Data = body[off:end]
		f, err := b.l.c.JS.PublishMsgAsync(m, jetstream.WithExpectStream(b.name()))
		if err != nil {
			return fmt.Errorf("put body: part at %d: %w", off, err)
		}
		acks = append(acks, f)
		if end == len(body) {
			break
		}
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("put body: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("put body: %w", ctx.Err())
		}
	}
	if b.blocks != nil {
		if err := b.blocks.SyncAll(); err != nil {
			return fmt.Errorf("put body: %w", err)
		}
	}
	return nil
}

// timeoutPerMiB is what a put or a read of n bytes gets beyond the log's
// timeout: a second per MiB.
func timeoutPerMiB(n int) time.Duration { return time.Duration(n>>20) * time.Second }

// parts returns the messages of the body whose digest is bd, in the
// order stored (copies from retried puts included).
func (b *bodyStore) parts(ctx context.Context, bd [32]byte, want int) ([]natsio.Message, error) {
	s, err := b.bind(ctx, false)
	if err != nil || s == nil {
		return nil, err
	}
	subject := BodySubject(bd)
	var out []natsio.Message
	from := uint64(1)
	for {
		ctx, cancel := b.l.c.WithTimeout(ctx)
		got, pending, err := b.l.c.Batch(ctx, b.name(), natsio.GetRequest{Seq: from, NextFor: subject, Batch: want}, nil)
		cancel()
		if err != nil {
			return out, fmt.Errorf("body %s: %w", subject, err)
		}
		out = append(out, got...)
		if len(got) == 0 || pending == 0 {
			return out, nil
		}
		from = got[len(got)-1].Seq + 1
	}
}

// get returns the body of size bytes whose digest is bd, from its parts.
// A body missing or incomplete is an error wrapping records.ErrCorrupt:
// the record that names it does not verify.
func (b *bodyStore) get(ctx context.Context, bd [32]byte, size int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.l.opts.Timeout+timeoutPerMiB(size))
	defer cancel()
	ms, err := b.parts(ctx, bd, size/BodyPart+1)
	if err != nil {
		return nil, err
	}
	body := make([]byte, size)
	have := 0
	seen := make(map[int]bool)
	for _, m := range ms {
		off, err1 := strconv.Atoi(m.Header.Get(hdrPartOffset))
		total, err2 := strconv.Atoi(m.Header.Get(hdrPartSize))
		if err1 != nil || err2 != nil || total != size || off < 0 || off+len(m.Data) > size || seen[off] {
			continue // a copy, or a part of no body of this size
		}
		if len(m.Data) != min(BodyPart, size-off) {
			continue
		}
		seen[off] = true
		copy(body[off:], m.Data)
		have += len(m.Data)
	}
	if have != size {
		return nil, fmt.Errorf("body kept outside on %s: %d of %d bytes stored: %w", BodySubject(bd), have, size, records.ErrCorrupt)
	}
	return body, nil
}

// erase securely deletes every part of the body whose digest is bd, the
// deletes announced first (natsio.Conn.BeginErase) so that a server killed
// in one is scrubbed before it serves again. No stream or no part is no
// error. It returns the intent, for the caller to close once the deletes
// are durable (sync).
func (b *bodyStore) erase(ctx context.Context, bd [32]byte) (*natsio.EraseIntent, error) {
	s, err := b.bind(ctx, false)
	if err != nil || s == nil {
		return nil, err
	}
	ms, err := b.parts(ctx, bd, 256)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	seqs := make([]uint64, len(ms))
	for i, m := range ms {
		seqs[i] = m.Seq
	}
	intent, err := b.l.c.BeginErase(b.name(), seqs)
	if err != nil {
		return nil, err
	}
	for _, seq := range seqs {
		if err := b.l.secureDelete(ctx, s, seq); err != nil {
			intent.Close()
			return nil, fmt.Errorf("erase body %s: part at %d: %w", BodySubject(bd), seq, err)
		}
	}
	return intent, nil
}

// sync makes the bodies' deletes durable on the embedded store.
func (b *bodyStore) sync() error {
	b.mu.Lock()
	blocks := b.blocks
	b.mu.Unlock()
	if blocks == nil {
		return nil
	}
	return blocks.SyncAll()
}
