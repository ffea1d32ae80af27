package fold

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// benchActor is the actor of the synthetic records.
const benchActor = "did:sync:agent:test"

// synthetic fills es with the records at clocks from+1 …: threads
// round-robin, one in ten a checkpoint, each chained on the previous record
// of its thread. Ids are the clock in the first bytes: the fold never
// recomputes an id, so the records need no hashing.
type synthetic struct {
	threads []string
	heads   []records.ID
	step    []byte
	cp      []byte
	recs    []records.Record
}

func newSynthetic(b testing.TB, threads, batch int) *synthetic {
	s := &synthetic{heads: make([]records.ID, threads), recs: make([]records.Record, batch)}
	for i := range threads {
		s.threads = append(s.threads, fmt.Sprintf("th_%06d", i))
	}
	cp, err := records.New(records.ActLearn, records.KindCheckpoint, "x", benchActor, time.UnixMilli(1), &records.Checkpoint{
		Summary: "Compared pgvector, Qdrant and LanceDB; pgvector with HNSW met the latency target.", Learnings: []string{"l"}})
	if err != nil {
		b.Fatal(err)
	}
	step, err := records.New(records.ActDo, "agent.step", "x", benchActor, time.UnixMilli(1), map[string]any{"tool": "go test", "n": 3})
	if err != nil {
		b.Fatal(err)
	}
	s.cp, s.step = cp.Body, step.Body
	return s
}

func (s *synthetic) fill(es []records.Entry, from uint64) {
	for i := range es {
		c := from + uint64(i) + 1
		t := int(c % uint64(len(s.threads)))
		r := &s.recs[i]
		*r = records.Record{Header: records.Header{
			V: 1, Act: records.ActDo, Kind: "agent.step", Thread: s.threads[t], Actor: benchActor,
			TS: 1_700_000_000_000 + int64(c), Prev: s.heads[t],
		}, Body: s.step}
		if c%10 == 0 {
			r.Header.Act, r.Header.Kind, r.Body = records.ActLearn, records.KindCheckpoint, s.cp
		}
		var id records.ID
		binary.BigEndian.PutUint64(id[:], c)
		s.heads[t] = id
		es[i] = records.Entry{Clock: c, ID: id, Record: r}
	}
}

// BenchmarkFold folds 1,000,000 records (1,000 threads, one in ten a
// checkpoint) in memory, in batches of 1,000 as the runtime does: apply,
// encode the changed values (coalesced per batch), store in a
// MemoryStore. No record decoding: that is the log's, measured end to end
// by BenchmarkRuntimeApply.
func BenchmarkFold(b *testing.B) {
	const total, batch = 1_000_000, 1000
	ctx := context.Background()
	b.ReportAllocs()
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		syn := newSynthetic(b, 1000, batch)
		st := NewMemoryStore()
		s := NewState(Index(), st, &MemoryLog{}, 0)
		s.Emptied()
		es := make([]records.Entry, batch)
		b.StartTimer()
		start := time.Now()
		for from := uint64(0); from < total; from += batch {
			syn.fill(es, from)
			if err := s.Apply(ctx, es); err != nil {
				b.Fatal(err)
			}
			ws, err := s.Changes()
			if err != nil {
				b.Fatal(err)
			}
			revs, err := st.Commit(ctx, ws)
			if err != nil {
				b.Fatal(err)
			}
			s.Committed(ws, revs)
			s.SetBase(from + batch)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(total*b.N)/elapsed.Seconds(), "records/s")
}
