package records

import (
	"testing"
	"time"
)

// typicalCheckpoint is a checkpoint body of about 300 bytes.
func typicalCheckpoint() *Checkpoint {
	return &Checkpoint{
		Summary: "Compared pgvector, Qdrant and LanceDB for one million 768-dimension embeddings; " +
			"pgvector with HNSW met the latency target.",
		Learnings: []string{
			"pgvector with HNSW answers k=10 in under 5 ms",
			"LanceDB needs no server but rebuilds indexes slowly",
		},
		NextSteps: []string{"benchmark recall at k=10", "write the migration"},
		SessionID: "sess-7f3a9c",
		Name:      "vector-db-choice",
	}
}

func BenchmarkNewMarshal(b *testing.B) {
	c := typicalCheckpoint()
	ts := time.UnixMilli(1700000000000)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		r, err := New(ActLearn, KindCheckpoint, "research/vector-db", "did:sync:agent:dev", ts, c)
		if err != nil {
			b.Fatal(err)
		}
		data, err := r.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		n = len(data)
	}
	b.SetBytes(int64(n))
}

func BenchmarkUnmarshalVerify(b *testing.B) {
	r, err := New(ActLearn, KindCheckpoint, "research/vector-db", "did:sync:agent:dev", time.UnixMilli(1700000000000), typicalCheckpoint())
	if err != nil {
		b.Fatal(err)
	}
	data, err := r.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	id := r.ID()
	b.Logf("body %d bytes, envelope %d bytes", len(r.Body), len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := Unmarshal(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := got.Verify(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointCodec: a typical checkpoint body encoded and decoded
// directly (what MarshalCBOR and DecodeCheckpoint do) against the generic
// encoder and decoder (through a map and generic values).
func BenchmarkCheckpointCodec(b *testing.B) {
	c := *typicalCheckpoint()
	body, err := c.MarshalCBOR()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode/direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.MarshalCBOR(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.marshalMap(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeCheckpoint(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCheckpointGeneric(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
