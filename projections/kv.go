package projections

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
)

// Headers the store sets on its writes; natsio.PublishBatch adds the atomic
// batch ones.
const (
	hdrExpectSubj  = "Nats-Expected-Last-Subject-Sequence"
	hdrKVOperation = "KV-Operation"
)

// maxAtomic is the most messages in one atomic batch (the server's
// default limit).
const maxAtomic = 1000

// MetaModel is the bucket of positions and leases ("pos.<name>",
// "lease.<name>").
const MetaModel = "meta"

// BucketName is the KV bucket of model for the log in stream:
// "spl_proj_<model>" for the default stream, "spl_proj_<stream>_<model>"
// for another, so that logs sharing a server keep apart.
func BucketName(stream, model string) string {
	if stream == log.DefaultStream {
		return "spl_proj_" + model
	}
	var b strings.Builder
	for _, r := range stream {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return "spl_proj_" + b.String() + "_" + model
}

// kvStreamName is the stream that holds the bucket of model for the log
// in stream.
func kvStreamName(stream, model string) string { return "KV_" + BucketName(stream, model) }

// kvStore is the Store of the runtime: one KV bucket per model (history
// 1), every write expecting its key's revision. On a server that fsyncs
// (a server of its own, a cluster) the writes go out as atomic batches:
// one fsync per batch rather than per value. On the embedded server,
// which fsyncs no KV stream, they go out as plain publishes sent all at
// once: an atomic batch costs the server a staging store of its own
// (milliseconds) and buys no fewer fsyncs there.
type kvStore struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	d        direct
	stream   string // the log's stream
	replicas int
}

var _ Store = (*kvStore)(nil)

func (s *kvStore) bucket(model string) string       { return BucketName(s.stream, model) }
func (s *kvStore) kvStream(model string) string     { return kvStreamName(s.stream, model) }
func (s *kvStore) subject(model, key string) string { return "$KV." + s.bucket(model) + "." + key }

// ensure creates the bucket of model with the settings the store needs
// (atomic batches, direct gets, one revision per key). An existing bucket
// keeps its settings, but for its de-duplication window, brought down to
// log.DuplicateWindow as the log's stream is: a client must not bring a
// bucket that spl serve made with 3 replicas down to its own default.
func (s *kvStore) ensure(ctx context.Context, model string) error {
	b := s.bucket(model)
	cfg := jetstream.StreamConfig{
		Name:               s.kvStream(model),
		Description:        "spl projection read model " + model,
		Subjects:           []string{"$KV." + b + ".>"},
		MaxMsgsPerSubject:  1,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgSize:         -1,
		MaxConsumers:       -1,
		Storage:            jetstream.FileStorage,
		Replicas:           s.replicas,
		AllowRollup:        true,
		DenyDelete:         true,
		AllowDirect:        true,
		Discard:            jetstream.DiscardNew,
		Duplicates:         log.DuplicateWindow, // no Nats-Msg-Id here either
		AllowAtomicPublish: true,
	}
	st, err := s.js.Stream(ctx, cfg.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := s.js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("bucket %s: %w", b, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("bucket %s: %w", b, err)
	}
	have := st.CachedInfo().Config
	if have.Duplicates <= cfg.Duplicates {
		return nil
	}
	have.Duplicates = cfg.Duplicates
	if _, err := s.js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("bucket %s: de-duplication window: %w", b, err)
	}
	return nil
}

// purge removes every value of model. Writers that still expect a
// revision of the purged values fail.
func (s *kvStore) purge(ctx context.Context, model string) error {
	st, err := s.js.Stream(ctx, s.kvStream(model))
	if err != nil {
		return fmt.Errorf("bucket %s: %w", s.bucket(model), err)
	}
	if err := st.Purge(ctx); err != nil {
		return fmt.Errorf("purge %s: %w", s.bucket(model), err)
	}
	return nil
}

// Load implements Store.
func (s *kvStore) Load(ctx context.Context, keys []Key) ([]Stored, error) {
	out := make([]Stored, len(keys))
	byModel := make(map[string][]int)
	var models []string
	for i, k := range keys {
		if _, ok := byModel[k.Model]; !ok {
			models = append(models, k.Model)
		}
		byModel[k.Model] = append(byModel[k.Model], i)
	}
	for _, m := range models {
		idx := byModel[m]
		subjects := make([]string, len(idx))
		for j, i := range idx {
			subjects[j] = s.subject(m, keys[i].Key)
		}
		msgs, ok, err := s.d.lasts(ctx, s.kvStream(m), subjects)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			if !ok[j] {
				continue
			}
			out[i].Rev = msgs[j].seq
			if !msgs[j].deleted() {
				out[i].Data = msgs[j].data
			}
		}
	}
	return out, nil
}

// Commit implements Store. The writes of each model go out as atomic
// batches of at most maxAtomic, the models side by side.
func (s *kvStore) Commit(ctx context.Context, ws []Write) ([]uint64, error) {
	revs := make([]uint64, len(ws))
	byModel := make(map[string][]int)
	var models []string
	for i, w := range ws {
		if _, ok := byModel[w.Key.Model]; !ok {
			models = append(models, w.Key.Model)
		}
		byModel[w.Key.Model] = append(byModel[w.Key.Model], i)
	}
	errs := make([]error, len(models))
	var wg sync.WaitGroup
	for mi, m := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := byModel[m]
			for start := 0; start < len(idx); start += maxAtomic {
				if err := s.publish(ctx, ws, idx[start:min(start+maxAtomic, len(idx))], revs); err != nil {
					errs[mi] = fmt.Errorf("store %s: %w", s.bucket(m), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return revs, nil
}

func (s *kvStore) message(w Write) *nats.Msg {
	msg := nats.NewMsg(s.subject(w.Key.Model, w.Key.Key))
	msg.Data = w.Data
	if w.Data == nil {
		msg.Header.Set(hdrKVOperation, "DEL")
	}
	msg.Header.Set(hdrExpectSubj, strconv.FormatUint(w.Expect, 10))
	return msg
}

// publish stores the writes ws[idx...], one model, and sets their
// revisions: as one atomic batch (a plain publish when alone), or where
// the server fsyncs nothing itself (the embedded one, spl serve on one
// node: natsio.Conn.SelfSync) as plain publishes each landing on its own.
func (s *kvStore) publish(ctx context.Context, ws []Write, idx []int, revs []uint64) error {
	ctx, cancel := s.d.context(ctx)
	defer cancel()
	msgs := make([]*nats.Msg, len(idx))
	for j, i := range idx {
		msgs[j] = s.message(ws[i])
	}
	if s.d.c.SelfSync() {
		seqs, errs := s.d.c.PublishEach(ctx, msgs)
		var conflict, other error
		for j, i := range idx {
			switch err := errs[j]; {
			case err == nil:
				revs[i] = seqs[j]
			case errors.Is(err, natsio.ErrExpectation):
				conflict = cmp.Or(conflict, err)
			default:
				other = cmp.Or(other, err)
			}
		}
		if conflict != nil {
			return fmt.Errorf("%w: %v", ErrConflict, conflict)
		}
		return other
	}
	first, err := natsio.PublishBatch(ctx, s.nc, msgs)
	if errors.Is(err, natsio.ErrExpectation) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	if err != nil {
		return err
	}
	for j, i := range idx {
		revs[i] = first + uint64(j)
	}
	return nil
}

// dump returns every value of model, by key: for tests, and for comparing
// a rebuilt model with the live one.
func (s *kvStore) dump(ctx context.Context, model string) (map[string][]byte, error) {
	out := make(map[string][]byte)
	prefix := "$KV." + s.bucket(model) + "."
	for from := uint64(1); ; {
		ms, pending, err := s.d.batch(ctx, s.kvStream(model), getRequest{Seq: from, Batch: 1024})
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			k := strings.TrimPrefix(m.subject, prefix)
			if m.deleted() {
				delete(out, k)
			} else {
				out[k] = m.data
			}
			from = m.seq + 1
		}
		if len(ms) == 0 || pending == 0 {
			return out, nil
		}
	}
}
