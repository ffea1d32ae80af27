package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spl-dev/spl/records"
)

// The payload of every workload: one session checkpoint (summary,
// learnings, next steps; about 350 bytes of content), the same content for
// every peer. spl stores it as a records.Checkpoint; raw JetStream stores
// the envelope bytes spl would store; the SQL peers store it the way
// LangGraph's PostgresSaver.put does (summary inline in the checkpoint
// JSON, the two lists as msgpack blobs in checkpoint_blobs).

// actor is the DID every spl record is emitted as.
const actor = "did:sync:agent:bench"

// content is checkpoint number i of a thread, at step `step` of it.
func content(i, step int) records.Checkpoint {
	return records.Checkpoint{
		Summary: fmt.Sprintf("Step %d (record %d): moved token validation into the auth middleware, "+
			"replaced the session mutex with a sharded map and updated the callers in 14 files; "+
			"the integration suite is green except two flaky timeouts in the payment tests.", step, i),
		Learnings: []string{
			"the session mutex was held across a network call; sharding removed the contention",
			"middleware order matters: validation must run before the rate limiter",
		},
		NextSteps: []string{
			"write the migration tests for the token table",
			"quarantine the two flaky payment tests and file an issue",
		},
	}
}

// threadName is the id of thread k: UUID-shaped, as agent frameworks name
// sessions, and a plain subject token for spl (no base64 needed).
func threadName(k int) string {
	var b [16]byte
	x := splitmix(uint64(k) + 1)
	y := splitmix(x)
	binary.BigEndian.PutUint64(b[:8], x)
	binary.BigEndian.PutUint64(b[8:], y)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Plan is the order in which a store is filled: record i goes to thread
// Thread[i] as that thread's Step[i]-th record (from 1).
//
// One thread in a hundred is long (LongLen records); the others share the
// rest evenly (about ten each at 1M records over 100k threads). Active
// threads interleave as concurrent agent sessions do: Active threads are
// open at any moment, each emitting in turn; when one ends, the next
// thread starts. So a thread's records are spread over a stretch of the
// log, not next to each other, and not over the whole log either.
type Plan struct {
	Records, Threads, Active int
	Thread                   []int32
	Step                     []int32
	Long                     []int // the long threads
	LongLen                  int
}

// NewPlan lays out n records over t threads.
func NewPlan(n, t int) *Plan {
	p := &Plan{Records: n, Threads: t, Active: activeThreads(t), LongLen: 100}
	size := make([]int, t)
	long := 0
	for k := 0; k < t; k += 100 {
		if (long+1)*p.LongLen > n/2 {
			break
		}
		size[k] = p.LongLen
		p.Long = append(p.Long, k)
		long++
	}
	rest, short := n-long*p.LongLen, t-long
	j := 0
	for k := range t {
		if size[k] != 0 {
			continue
		}
		size[k] = rest / short
		if j < rest%short {
			size[k]++
		}
		j++
	}
	p.Thread = make([]int32, 0, n)
	p.Step = make([]int32, 0, n)
	type slot struct{ k, done int }
	slots := make([]slot, 0, p.Active)
	next := 0
	for next < t && len(slots) < p.Active {
		if size[next] > 0 {
			slots = append(slots, slot{k: next})
		}
		next++
	}
	for len(slots) > 0 {
		for s := 0; s < len(slots); s++ {
			sl := &slots[s]
			sl.done++
			p.Thread = append(p.Thread, int32(sl.k))
			p.Step = append(p.Step, int32(sl.done))
			if sl.done == size[sl.k] {
				// The thread ends; the next one takes its slot.
				for next < t && size[next] == 0 {
					next++
				}
				if next < t {
					*sl = slot{k: next}
					next++
				} else {
					slots = append(slots[:s], slots[s+1:]...)
					s--
				}
			}
		}
	}
	return p
}

// activeThreads is how many threads of t are active at a time: one in a
// hundred, at least 16.
func activeThreads(t int) int { return min(max(t/100, 16), t) }

// RandomThread picks any thread.
func (p *Plan) RandomThread(r *rand.Rand) string { return threadName(r.IntN(p.Threads)) }

// RandomLong picks a long thread.
func (p *Plan) RandomLong(r *rand.Rand) string { return threadName(p.Long[r.IntN(len(p.Long))]) }

// uuid6 returns a LangGraph-style checkpoint id: a v6 UUID (time-ordered,
// so that ORDER BY checkpoint_id DESC is newest first, as LangGraph relies
// on) for time t, with seq as clock sequence and node, so that ids made in
// the same 100 ns tick still differ.
func uuid6(t time.Time, seq uint64) string {
	// 100 ns intervals since 1582-10-15.
	ts := uint64(t.UnixNano()/100) + 0x01b21dd213814000
	var b [16]byte
	binary.BigEndian.PutUint32(b[0:4], uint32(ts>>28))
	binary.BigEndian.PutUint16(b[4:6], uint16(ts>>12))
	binary.BigEndian.PutUint16(b[6:8], uint16(ts&0x0fff)|0x6000)
	binary.BigEndian.PutUint64(b[8:16], seq&0x3fffffffffffffff|0x8000000000000000)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// channelVersion is a LangGraph channel version string, as its default
// get_next_version makes them: a zero-padded counter and a random float.
func channelVersion(step int, r float64) string {
	return fmt.Sprintf("%032d.%.16f", step, r)
}

// msgpackStrings encodes a list of strings as msgpack, the serde LangGraph
// uses for blob values (type "msgpack").
func msgpackStrings(list []string) []byte {
	var b []byte
	n := len(list)
	switch {
	case n < 16:
		b = append(b, 0x90|byte(n))
	default:
		b = append(b, 0xdc, byte(n>>8), byte(n))
	}
	for _, s := range list {
		l := len(s)
		switch {
		case l < 32:
			b = append(b, 0xa0|byte(l))
		case l < 256:
			b = append(b, 0xd9, byte(l))
		default:
			b = append(b, 0xda, byte(l>>8), byte(l))
		}
		b = append(b, s...)
	}
	return b
}

// unmsgpackStrings decodes what msgpackStrings encodes.
func unmsgpackStrings(b []byte) ([]string, error) {
	bad := fmt.Errorf("msgpack: not a list of strings")
	if len(b) == 0 {
		return nil, bad
	}
	var n int
	switch {
	case b[0]&0xf0 == 0x90:
		n, b = int(b[0]&0x0f), b[1:]
	case b[0] == 0xdc && len(b) >= 3:
		n, b = int(b[1])<<8|int(b[2]), b[3:]
	default:
		return nil, bad
	}
	out := make([]string, 0, n)
	for range n {
		if len(b) == 0 {
			return nil, bad
		}
		var l int
		switch {
		case b[0]&0xe0 == 0xa0:
			l, b = int(b[0]&0x1f), b[1:]
		case b[0] == 0xd9 && len(b) >= 2:
			l, b = int(b[1]), b[2:]
		case b[0] == 0xda && len(b) >= 3:
			l, b = int(b[1])<<8|int(b[2]), b[3:]
		default:
			return nil, bad
		}
		if len(b) < l {
			return nil, bad
		}
		out = append(out, string(b[:l]))
		b = b[l:]
	}
	return out, nil
}
