package log

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spl-dev/spl/records"
)

// VerifyReport is what Verify found.
type VerifyReport struct {
	Checked int             // records whose id, digest and chain link verified
	Erased  []ErasedRecord  // records erased by an erasure record (explained)
	Corrupt []VerifyProblem // messages whose id or body digest does not verify
	Missing []VerifyProblem // chain gaps and deletions that no erasure explains
	Threads int             // threads walked
	// Loss is set when the stream is behind its high-water mark (see
	// CheckMark): records acknowledged once are gone, and nothing in the
	// stream shows it.
	Loss *MarkLoss

	// Signatures (sign.go): every record that verified is checked against
	// the key bound to its actor at its clock (records.KeyRing.Check).
	Signed        int          // records signed by their actor's key
	UnsignedCount int          // records without a signature
	Unsigned      []SigProblem // the first of them (at most 100)
	BadSig        []SigProblem // bad signatures, and signatures by a key not the actor's

	erased map[string]*erasedSet
	signed map[records.ID]signedAt // signing id → first record (sign.go)
}

// ErasedRecord is a record that an erasure removed.
type ErasedRecord struct {
	ID       records.ID
	Clock    uint64
	Thread   string
	ErasedBy records.ID // the erasure record
	Reason   string
}

// VerifyProblem is one corrupt or missing record.
type VerifyProblem struct {
	Clock   uint64     // where it is (corrupt), or the record whose prev is missing
	Subject string     // the message's subject
	ID      records.ID // the id the message claims, or the missing prev
	Reason  string
}

// OK reports whether nothing is corrupt or missing and no signature
// failed. Unsigned records are not failures here; see OKSigned.
func (r VerifyReport) OK() bool {
	return len(r.Corrupt) == 0 && len(r.Missing) == 0 && r.Loss == nil && len(r.BadSig) == 0
}

// OKSigned is OK that, when requireSigned, also fails on unsigned records:
// the rule of a log whose server requires signatures.
func (r VerifyReport) OKSigned(requireSigned bool) bool {
	return r.OK() && (!requireSigned || r.UnsignedCount == 0)
}

type erasedSet struct {
	byID map[records.ID]erasedTarget
}

type erasedTarget struct {
	target  records.ErasureTarget
	erasure records.ID
	reason  string
}

// Verify walks thread and checks every record's id, body digest and prev
// link, bridging erased records through the headers that erasure records
// keep. A gap in the chain that no erasure explains is reported missing.
func (l *Log) Verify(ctx context.Context, thread string) (VerifyReport, error) {
	return l.verify(ctx, ThreadSubject(thread), nil, false)
}

// VerifyAll walks every thread of the log. Beyond Verify it accounts for
// every clock: a message gone from the stream that no erasure names is
// reported missing, wherever it was. progress, when set, is called with
// the number of messages read so far.
func (l *Log) VerifyAll(ctx context.Context, progress func(read uint64)) (VerifyReport, error) {
	return l.verify(ctx, SubjectPrefix+".>", progress, true)
}

// chainState is the walk's position in one thread.
type chainState struct {
	last      records.ID // id of the thread's last record seen
	lastClock uint64     // its clock
	started   bool
}

// brokenLink is a record whose prev is not the record before it on its
// thread and that no erasure explains: reported missing at first, and a
// fork once prev is found earlier on the thread.
type brokenLink struct {
	problem          int // index in VerifyReport.Missing
	thread           string
	id, prev, last   records.ID
	clock, lastClock uint64
}

func (l *Log) verify(ctx context.Context, filter string, progress func(uint64), all bool) (VerifyReport, error) {
	rep := VerifyReport{}
	loss, err := l.CheckMark(ctx)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	rep.Loss = loss
	// Pass 0: the actor key bindings, of the whole log whatever the filter.
	ring, bad, err := l.KeyRing(ctx)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	for _, b := range bad {
		rep.BadSig = append(rep.BadSig, SigProblem{Thread: records.ActorThread, Reason: "binding ignored: " + b.Error()})
	}
	// Pass 1: every erasure record under the filter, by thread token.
	erased := make(map[string]*erasedSet)
	erasedClocks := make(map[uint64]bool)
	erasureFilter := strings.TrimSuffix(filter, ">") + records.KindErasure
	if all {
		erasureFilter = SubjectPrefix + ".*." + records.KindErasure
	}
	err = l.scan(ctx, erasureFilter, 1, 0, 256, func(m stored) bool {
		e, err := l.decode(m)
		if err != nil {
			return true // reported in pass 2
		}
		er, err := records.DecodeErasure(e.Record.Body)
		if err != nil {
			return true
		}
		tok := ThreadToken(e.Record.Header.Thread)
		set := erased[tok]
		if set == nil {
			set = &erasedSet{byID: make(map[records.ID]erasedTarget)}
			erased[tok] = set
		}
		for _, t := range er.Targets {
			if t.Message() {
				// A message that was no record: its clock is explained,
				// and nothing chained through it.
				erasedClocks[t.Clock] = true
				continue
			}
			set.byID[t.ID] = erasedTarget{target: t, erasure: e.ID, reason: er.Reason}
			if t.Clock != 0 {
				erasedClocks[t.Clock] = true
			}
			rep.Erased = append(rep.Erased, ErasedRecord{ID: t.ID, Clock: t.Clock, Thread: t.Header.Thread, ErasedBy: e.ID, Reason: er.Reason})
		}
		return true
	})
	if err != nil {
		return rep, fmt.Errorf("verify: read erasures: %w", err)
	}

	// Pass 2: every record in clock order, chained per thread.
	chains := make(map[string]*chainState)
	var broken []brokenLink
	var read, next uint64 = 0, 1
	err = l.scan(ctx, filter, 1, 0, 1024, func(m stored) bool {
		read++
		if progress != nil && read%10000 == 0 {
			progress(read)
		}
		if all {
			for c := next; c < m.clock; c++ {
				if !erasedClocks[c] {
					rep.Missing = append(rep.Missing, VerifyProblem{Clock: c, Reason: "message deleted and no erasure names it"})
				}
			}
			next = m.clock + 1
		}
		tok := subjectToken(m.subject)
		st := chains[tok]
		if st == nil {
			st = &chainState{}
			chains[tok] = st
		}
		e, err := l.decode(m)
		if err != nil {
			var claimed records.ID
			if id, perr := records.ParseID(m.hdr.Get(HeaderID)); perr == nil {
				claimed = id
			}
			rep.Corrupt = append(rep.Corrupt, VerifyProblem{Clock: m.clock, Subject: m.subject, ID: claimed, Reason: corruptReason(err)})
			// The chain goes on from the id the message claims, so one
			// corrupt record is reported once, not also as a gap.
			if !claimed.IsZero() {
				st.last, st.lastClock, st.started = claimed, m.clock, true
			}
			return true
		}
		if prev := e.Record.Header.Prev; prev != st.last {
			if !bridges(erased[tok], prev, st.last) {
				what := "previous record " + prev.String() + " is not in the log and no erasure names it"
				if prev.IsZero() {
					what = "record claims to be the first of its thread, after " + st.last.String()
				} else if st.started {
					broken = append(broken, brokenLink{problem: len(rep.Missing), thread: e.Record.Header.Thread,
						id: e.ID, prev: prev, last: st.last, clock: m.clock, lastClock: st.lastClock})
				}
				rep.Missing = append(rep.Missing, VerifyProblem{Clock: m.clock, Subject: m.subject, ID: prev, Reason: what})
			}
		}
		st.last, st.lastClock, st.started = e.ID, m.clock, true
		rep.Checked++
		rep.checkSig(ring, e)
		return true
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	if err := l.findForks(ctx, &rep, broken); err != nil {
		return rep, err
	}
	if all {
		last, err := l.LastClock(ctx)
		if err != nil {
			return rep, err
		}
		for c := next; c <= last; c++ {
			if !erasedClocks[c] {
				rep.Missing = append(rep.Missing, VerifyProblem{Clock: c, Reason: "message deleted and no erasure names it"})
			}
		}
	}
	if progress != nil {
		progress(read)
	}
	rep.Threads = len(chains)
	return rep, nil
}

// findForks looks for the prev of each broken link earlier on its thread.
// Where it is there, the thread forks: two records name the same prev, and
// the problem says so, naming both records and their clocks. Broken links
// are rare, so each costs a scan of its thread here rather than an index
// of every id during the walk.
func (l *Log) findForks(ctx context.Context, rep *VerifyReport, broken []brokenLink) error {
	for _, b := range broken {
		e, err := l.Get(ctx, b.prev, b.thread)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, records.ErrCorrupt):
			continue // missing it is (a corrupt record is reported as such)
		case err != nil:
			return fmt.Errorf("verify: look for %s: %w", b.prev, err)
		case e.Clock >= b.clock:
			continue
		}
		rep.Missing[b.problem].Reason = fmt.Sprintf("record %s (clock %d) links to %s (clock %d), not to the record before it, %s (clock %d): a fork",
			b.id, b.clock, b.prev, e.Clock, b.last, b.lastClock)
	}
	return nil
}

// bridges reports whether the chain from last reaches prev through erased
// records only: prev was erased, and its header's prev leads back to last.
func bridges(set *erasedSet, prev, last records.ID) bool {
	if set == nil {
		return false
	}
	for hops := 0; hops <= len(set.byID); hops++ {
		t, ok := set.byID[prev]
		if !ok {
			return false
		}
		prev = t.target.Header.Prev
		if prev == last {
			return true
		}
	}
	return false
}

func corruptReason(err error) string {
	var ce *CorruptError
	if errors.As(err, &ce) {
		if ce.Err != nil {
			return ce.Reason + ": " + ce.Err.Error()
		}
		return ce.Reason
	}
	return err.Error()
}
