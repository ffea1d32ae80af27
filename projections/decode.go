package projections

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// maxBatchBytes bounds the messages of one batch, and those the consumer
// holds.
const maxBatchBytes = 32 << 20

// decodedBatch is a batch of messages, verified.
type decodedBatch struct {
	entries []log.Entry
	corrupt []uint64 // clocks of the messages that do not verify
	last    uint64   // clock of the last message
	pending uint64   // messages the consumer has still to deliver after it
	err     error
}

// decodeLoop gathers the messages waiting (at most MaxBatch), decodes
// them and hands them on, until ctx ends.
func (r *Runtime) decodeLoop(ctx context.Context, msgs <-chan jetstream.Msg, out chan<- decodedBatch) {
	batch := make([]jetstream.Msg, 0, r.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case m := <-msgs:
			batch = append(batch, m)
		}
		size := len(batch[0].Data())
	drain:
		for len(batch) < r.opts.MaxBatch && size < maxBatchBytes {
			select {
			case m := <-msgs:
				batch = append(batch, m)
				size += len(m.Data())
			default:
				break drain
			}
		}
		var b decodedBatch
		b.entries, b.corrupt, b.last, b.pending, b.err = decodeBatch(r.log, batch)
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if b.err != nil {
			return
		}
	}
}

// decodeBatch verifies the messages of a batch, on every core, and returns
// the entries, the clocks of the messages that do not verify, the last
// clock, and the messages pending after it.
func decodeBatch(l *log.Log, batch []jetstream.Msg) ([]log.Entry, []uint64, uint64, uint64, error) {
	entries := make([]log.Entry, len(batch))
	errs := make([]error, len(batch))
	clocks := make([]uint64, len(batch))
	var pending uint64 // after the last message
	decode := func(i int) {
		m := batch[i]
		md, err := m.Metadata()
		if err != nil {
			errs[i] = fmt.Errorf("message metadata: %w", err)
			return
		}
		clocks[i] = md.Sequence.Stream
		if i == len(batch)-1 { // decoded by one goroutine, read after them all
			pending = md.NumPending
		}
		entries[i], errs[i] = l.DecodeMessage(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data())
	}
	workers := runtime.GOMAXPROCS(0)
	if len(batch) < 64 || workers == 1 {
		for i := range batch {
			decode(i)
		}
	} else {
		var wg sync.WaitGroup
		per := (len(batch) + workers - 1) / workers
		for w := 0; w < len(batch); w += per {
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				for i := lo; i < hi; i++ {
					decode(i)
				}
			}(w, min(w+per, len(batch)))
		}
		wg.Wait()
	}
	out := entries[:0]
	var corrupt []uint64
	for i, err := range errs {
		switch {
		case err == nil:
			out = append(out, entries[i])
		case errors.Is(err, records.ErrCorrupt):
			corrupt = append(corrupt, clocks[i])
		default:
			return nil, nil, 0, 0, err
		}
	}
	return out, corrupt, clocks[len(clocks)-1], pending, nil
}
