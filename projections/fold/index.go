package fold

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spl-dev/spl/records"
)

// IndexName is the name of the built-in projection, Index.
const IndexName = "index"

// The read models of Index.
const (
	// ModelThreads holds a [Thread] per thread, keyed by [ThreadKey].
	ModelThreads = "threads"
	// ModelCheckpoints holds the latest [Checkpoint] of each thread that
	// has one, keyed by [ThreadKey].
	ModelCheckpoints = "checkpoints"
	// ModelErased holds an [Erased] per erased record, keyed by the
	// record's id (text form).
	ModelErased = "erased"
)

// Thread is the value of a thread in ModelThreads: a summary of the
// thread's records that are not erased.
type Thread struct {
	Thread      string            `json:"thread"`
	Records     uint64            `json:"records"`     // records on the thread
	Checkpoints uint64            `json:"checkpoints"` // of them, checkpoints
	First       uint64            `json:"first"`       // clock of the oldest record (0: none known)
	FirstID     records.ID        `json:"first_id"`
	Last        uint64            `json:"last"` // clock of the newest record
	LastID      records.ID        `json:"last_id"`
	LastActor   string            `json:"last_actor"` // actor of the newest record
	LastTS      int64             `json:"last_ts"`    // ts of the newest record (Unix ms): the last activity
	Kinds       map[string]uint64 `json:"kinds"`      // records per kind
	Actors      map[string]uint64 `json:"actors"`     // records per actor
	Gaps        []Gap             `json:"gaps,omitempty"`
	Session     *SessionState     `json:"session,omitempty"` // the newest session status event; absent: none
	AsOf        uint64            `json:"as_of"`             // clock of the last entry that changed the value
}

// SessionState is the newest session status event of a thread (a record
// of one of records.SessionEventKinds): the status its kind says, and
// where it is. Like every value it holds header fields only: the error
// and the node a session failed at are in the record's body, which the
// reader fetches.
type SessionState struct {
	Status string     `json:"status"` // records.StatusPaused, …; a resumed session is running
	ID     records.ID `json:"id"`
	Clock  uint64     `json:"clock"`
	TS     int64      `json:"ts"` // Unix ms
	Kind   string     `json:"kind"`
}

// SessionStatus is the status of the session t's thread holds, by the
// one rule (records.SessionStatus): that of its newest session status
// event, else running when it has a checkpoint or a transcript event,
// else "" (not a session).
func (t *Thread) SessionStatus() string {
	last := ""
	if t.Session != nil {
		last = t.Session.Kind
	}
	return records.SessionStatus(last, t.Checkpoints > 0 || t.Kinds[records.KindTranscript] > 0)
}

// newSessionState returns the state session event e sets, nil when e is
// not one.
func newSessionState(e records.Entry) *SessionState {
	h := &e.Record.Header
	st := records.SessionStatusOf(h.Kind)
	if st == "" {
		return nil
	}
	return &SessionState{Status: st, ID: e.ID, Clock: e.Clock, TS: h.TS, Kind: h.Kind}
}

// Gap is a stretch of a thread's chain that the projection never saw:
// records deleted before it reached them (erased, in a rebuild or by a
// projector that lagged behind), or messages that did not verify. An
// erasure of a record inside a gap takes nothing off the counts, since the
// record was never counted. A gap is dropped once every link of the chain
// through it is an erased record.
type Gap struct {
	After   uint64      `json:"after"`              // clock of the record before the gap (0: the thread's start)
	AfterID *records.ID `json:"after_id,omitempty"` // its id
	Before  uint64      `json:"before"`             // clock of the record after the gap
	Top     records.ID  `json:"top"`                // the prev of that record: the newest record missing
}

// Applied implements Value.
func (t *Thread) Applied() uint64 { return t.AsOf }

// inGap reports whether clock c falls in one of t's gaps.
func (t *Thread) inGap(c uint64) bool {
	for _, g := range t.Gaps {
		if g.After < c && c < g.Before {
			return true
		}
	}
	return false
}

// Checkpoint is the value of a thread in ModelCheckpoints: its latest
// checkpoint that is not erased.
//
// The stored value holds the record's header fields only. Name, SessionID
// and Summary come from the record's body, which a read model never keeps:
// a copy in a KV bucket would outlive an erasure of the record (a KV
// update leaves the old revision's bytes in the bucket's files). Reader
// fills them in from the log when it returns a value.
type Checkpoint struct {
	Thread    string     `json:"thread"`
	ID        records.ID `json:"id"`
	Clock     uint64     `json:"clock"`
	TS        int64      `json:"ts"` // Unix ms
	Actor     string     `json:"actor"`
	AsOf      uint64     `json:"as_of"` // clock of the last entry that changed the value
	Name      string     `json:"-"`     // from the body, filled in by Reader
	SessionID string     `json:"-"`     // from the body, filled in by Reader
	Summary   string     `json:"-"`     // from the body, filled in by Reader
}

// Applied implements Value.
func (c *Checkpoint) Applied() uint64 { return c.AsOf }

// Erased is the value of an erased record in ModelErased.
type Erased struct {
	ID           records.ID  `json:"id"`             // the erased record
	Clock        uint64      `json:"clock"`          // its clock (0: the erasure did not say)
	Thread       string      `json:"thread"`         // its thread
	Kind         string      `json:"kind"`           // its kind
	Prev         *records.ID `json:"prev,omitempty"` // its prev
	Erasure      records.ID  `json:"erasure"`        // the erasure record that erased it
	ErasureClock uint64      `json:"erasure_clock"`  // the erasure's clock
	Reason       string      `json:"reason"`
	TS           int64       `json:"ts"` // ts of the erasure record (Unix ms)
}

// Applied implements Value: an erased value is never changed.
func (e *Erased) Applied() uint64 { return e.ErasureClock }

// ThreadKey is the key of thread in ModelThreads and ModelCheckpoints:
// its subject token (records.ThreadToken), with the "~" that starts the token
// of a thread that is not a plain token written "=" (KV keys allow no
// "~", and no plain token starts with "=").
func ThreadKey(thread string) string {
	tok := records.ThreadToken(thread)
	if rest, ok := strings.CutPrefix(tok, "~"); ok {
		return "=" + rest
	}
	return tok
}

// Index is the built-in projection: the thread index (ModelThreads), the
// latest checkpoint of each thread (ModelCheckpoints) and the erased
// records (ModelErased). The package doc gives its rules for erasures;
// the values are documented on their types.
func Index() Fold { return index{} }

type index struct{}

func (index) Name() string     { return IndexName }
func (index) Models() []string { return []string{ModelThreads, ModelCheckpoints, ModelErased} }

func (index) Decode(model string, data []byte) (Value, error) {
	var v Value
	switch model {
	case ModelThreads:
		v = &Thread{}
	case ModelCheckpoints:
		v = &Checkpoint{}
	case ModelErased:
		v = &Erased{}
	default:
		return nil, fmt.Errorf("index: no model %q", model)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("index: decode %s value: %w", model, err)
	}
	return v, nil
}

// erasure returns the body of e when e is an erasure the fold applies: kind
// core.erasure, act FORGET, a body that decodes. Any other record, even of
// kind core.erasure, is only counted.
func erasure(e records.Entry) *records.Erasure {
	h := &e.Record.Header
	if h.Kind != records.KindErasure || h.Act != records.ActForget {
		return nil
	}
	er, err := records.DecodeErasure(e.Record.Body)
	if err != nil {
		return nil
	}
	return er
}

func (index) Keys(e records.Entry, add func(Key)) {
	h := &e.Record.Header
	k := ThreadKey(h.Thread)
	add(Key{ModelThreads, k})
	if h.Kind == records.KindCheckpoint {
		add(Key{ModelCheckpoints, k})
	}
	if er := erasure(e); er != nil {
		for _, t := range er.Targets {
			if t.Message() {
				continue // no record: in no read model
			}
			add(Key{ModelErased, t.ID.String()})
			tk := ThreadKey(t.Header.Thread)
			add(Key{ModelThreads, tk})
			add(Key{ModelCheckpoints, tk})
		}
	}
}

func (ix index) Apply(tx *Tx, e records.Entry) error {
	h := &e.Record.Header
	k := ThreadKey(h.Thread)
	tk := Key{ModelThreads, k}
	v, err := tx.Get(tk)
	if err != nil {
		return err
	}
	th, _ := v.(*Thread)
	// Decide before the erasure below changes the thread's value, which
	// it may do at this very clock.
	fresh := th == nil || th.AsOf < e.Clock
	if fresh {
		if th, err = noteGap(tx, tk, th, e); err != nil {
			return err
		}
	}
	if er := erasure(e); er != nil {
		if err := ix.erase(tx, e, er); err != nil {
			return err
		}
		if v, err = tx.Get(tk); err != nil {
			return err
		}
		th, _ = v.(*Thread)
	}
	if fresh {
		tx.Put(tk, addRecord(th, e))
	}
	if h.Kind == records.KindCheckpoint {
		ck := Key{ModelCheckpoints, k}
		v, err := tx.Get(ck)
		if err != nil {
			return err
		}
		if cp, _ := v.(*Checkpoint); cp == nil || cp.AsOf < e.Clock {
			tx.Put(ck, newCheckpoint(cp, e, e.Clock))
		}
	}
	return nil
}

func newThread(thread string) *Thread {
	return &Thread{Thread: thread, Kinds: make(map[string]uint64, 2), Actors: make(map[string]uint64, 1)}
}

// noteGap records a gap in th when e does not chain on the thread's last
// record, through records erased before e, and returns th (new when nil
// and a gap was found).
func noteGap(tx *Tx, tk Key, th *Thread, e records.Entry) (*Thread, error) {
	var last uint64
	var lastID records.ID
	if th != nil {
		last, lastID = th.Last, th.LastID
	}
	cur := e.Record.Header.Prev
	for range maxChainWalk {
		if cur == lastID {
			return th, nil
		}
		er, err := erasedAt(tx, cur, e.Clock-1)
		if err != nil {
			return nil, err
		}
		if er == nil {
			break
		}
		cur = deref(er.Prev)
	}
	if th == nil {
		th = newThread(e.Record.Header.Thread)
	}
	g := Gap{After: last, Before: e.Clock, Top: cur}
	if last != 0 {
		g.AfterID = &lastID
	}
	th.Gaps = append(th.Gaps, g)
	tx.Put(tk, th)
	return th, nil
}

// maxChainWalk bounds a walk down a chain through erased records.
const maxChainWalk = 1 << 20

// addRecord counts e into th (nil: a new thread).
func addRecord(th *Thread, e records.Entry) *Thread {
	h := &e.Record.Header
	if th == nil {
		th = newThread(h.Thread)
	}
	if th.First == 0 {
		th.First, th.FirstID = e.Clock, e.ID
	}
	th.Records++
	if h.Kind == records.KindCheckpoint {
		th.Checkpoints++
	}
	th.Kinds[h.Kind]++
	th.Actors[h.Actor]++
	if ss := newSessionState(e); ss != nil {
		th.Session = ss
	}
	th.Last, th.LastID, th.LastActor, th.LastTS = e.Clock, e.ID, h.Actor, h.TS
	th.AsOf = e.Clock
	return th
}

// newCheckpoint makes the value of checkpoint record e, as of clock asOf,
// reusing cp when not nil.
func newCheckpoint(cp *Checkpoint, e records.Entry, asOf uint64) *Checkpoint {
	h := &e.Record.Header
	if cp == nil {
		cp = &Checkpoint{}
	}
	*cp = Checkpoint{Thread: h.Thread, ID: e.ID, Clock: e.Clock, TS: h.TS, Actor: h.Actor, AsOf: asOf}
	return cp
}

// erase applies erasure e: it lists each target in ModelErased (first
// erasure wins), then takes the targets out of the other models, thread by
// thread.
func (ix index) erase(tx *Tx, e records.Entry, er *records.Erasure) error {
	var threads []string
	byThread := make(map[string][]records.ErasureTarget)
	seen := make(map[records.ID]bool, len(er.Targets))
	for _, t := range er.Targets {
		if t.Message() || seen[t.ID] || t.Header.ID() != t.ID || t.Clock >= e.Clock || t.Header.Kind == records.KindErasure {
			// A message that was no record (in no read model), named
			// twice, a header that is not the target's, a clock to
			// come, or an erasure record: the log deletes none of these
			// (erasures stay as the audit trail; records.Validate refuses
			// to name one, but a record stored before that rule may).
			continue
		}
		seen[t.ID] = true
		k := Key{ModelErased, t.ID.String()}
		v, err := tx.Get(k)
		if err != nil {
			return err
		}
		if old, ok := v.(*Erased); ok {
			if old.ErasureClock < e.Clock {
				continue // erased before: nothing to do
			}
			// Stored by this very erasure before a crash: the other
			// models may still need it.
		} else {
			val := &Erased{
				ID: t.ID, Clock: t.Clock, Thread: t.Header.Thread, Kind: t.Header.Kind,
				Erasure: e.ID, ErasureClock: e.Clock, Reason: er.Reason, TS: e.Record.Header.TS,
			}
			if !t.Header.Prev.IsZero() {
				prev := t.Header.Prev
				val.Prev = &prev
			}
			tx.Put(k, val)
		}
		th := t.Header.Thread
		if _, ok := byThread[th]; !ok {
			threads = append(threads, th)
		}
		byThread[th] = append(byThread[th], t)
	}
	for _, th := range threads {
		if err := ix.eraseIn(tx, e, th, byThread[th]); err != nil {
			return fmt.Errorf("erase in thread %q: %w", th, err)
		}
	}
	return nil
}

// eraseIn takes targets, all of thread, out of the thread's values. Both
// values are rewritten as of the erasure whether or not a target was
// counted in them, so that the models do not depend on whether the
// projection saw the targets before they were deleted.
func (ix index) eraseIn(tx *Tx, e records.Entry, thread string, targets []records.ErasureTarget) error {
	clock := e.Clock
	key := ThreadKey(thread)
	tk, ck := Key{ModelThreads, key}, Key{ModelCheckpoints, key}
	v, err := tx.Get(tk)
	if err != nil {
		return err
	}
	if th, _ := v.(*Thread); th != nil && th.AsOf < clock {
		if err := ix.eraseFromThread(tx, e, tk, th, targets); err != nil {
			return err
		}
	}
	if v, err = tx.Get(ck); err != nil {
		return err
	}
	cp, _ := v.(*Checkpoint)
	if cp == nil || cp.AsOf >= clock {
		return nil
	}
	for _, t := range targets {
		if t.ID != cp.ID {
			continue
		}
		// The latest checkpoint is gone: the one before it that is not
		// erased takes its place.
		prev, ok, err := lastBefore(tx, thread, records.KindCheckpoint, cp.Clock)
		if err != nil {
			return err
		}
		if !ok {
			tx.Delete(ck)
			return nil
		}
		cp = newCheckpoint(nil, prev, clock)
		break
	}
	cp.AsOf = clock
	tx.Put(ck, cp)
	return nil
}

// eraseFromThread takes the targets that th counts out of th: counts,
// the first and last records, gaps.
func (ix index) eraseFromThread(tx *Tx, e records.Entry, tk Key, th *Thread, targets []records.ErasureTarget) error {
	// Which targets does th count? Decide on th as it is before any of
	// them is taken out: a record counted is at or before the last one,
	// and not in a gap. An id's clock never changes.
	counted := make([]uint64, len(targets))
	for i, t := range targets {
		c := t.Clock
		if c == 0 { // a target without its clock (not written by spl's log)
			var err error
			if c, err = tx.Find(th.Thread, t.Header.Kind, t.ID, 0); err != nil {
				return err
			}
		}
		if c != 0 && c <= th.Last && !th.inGap(c) {
			counted[i] = c
		}
	}
	firstGone, lastGone, sessionGone := false, false, false
	for i, t := range targets {
		sessionGone = sessionGone || th.Session != nil && t.ID == th.Session.ID
		c := counted[i]
		if c == 0 {
			continue
		}
		h := &t.Header
		th.Records = sub1(th.Records)
		if h.Kind == records.KindCheckpoint {
			th.Checkpoints = sub1(th.Checkpoints)
		}
		decr(th.Kinds, h.Kind)
		decr(th.Actors, h.Actor)
		firstGone = firstGone || c == th.First
		lastGone = lastGone || c == th.Last
	}
	if err := resolveGaps(tx, th); err != nil {
		return err
	}
	own := e.Record.Header.Thread == th.Thread // the erasure becomes the last record next
	if th.Records == 0 && len(th.Gaps) == 0 && !own {
		tx.Delete(tk)
		return nil
	}
	if firstGone {
		first, ok, err := firstAfter(tx, th.Thread, th.First)
		if err != nil {
			return err
		}
		th.First, th.FirstID = first.Clock, first.ID
		if !ok {
			th.First, th.FirstID = 0, records.ID{}
		}
	}
	if lastGone && !own {
		last, ok, err := lastBefore(tx, th.Thread, "", th.Last)
		if err != nil {
			return err
		}
		if ok {
			h := &last.Record.Header
			th.Last, th.LastID, th.LastActor, th.LastTS = last.Clock, last.ID, h.Actor, h.TS
		}
	}
	if sessionGone {
		// The status falls back to the newest earlier status event
		// that is not erased, or none.
		var prev *SessionState
		for _, kind := range records.SessionEventKinds {
			last, ok, err := lastBefore(tx, th.Thread, kind, th.Session.Clock)
			if err != nil {
				return err
			}
			if ok && (prev == nil || last.Clock > prev.Clock) {
				prev = newSessionState(last)
			}
		}
		th.Session = prev
	}
	th.AsOf = e.Clock
	tx.Put(tk, th)
	return nil
}

// resolveGaps drops the gaps of th whose every link is now an erased record.
func resolveGaps(tx *Tx, th *Thread) error {
	kept := th.Gaps[:0]
	for _, g := range th.Gaps {
		done, err := accounted(tx, g)
		if err != nil {
			return err
		}
		if !done {
			kept = append(kept, g)
		}
	}
	th.Gaps = kept
	return nil
}

// accounted reports whether the chain through g, from its top down to the
// record before it, is all erased records.
func accounted(tx *Tx, g Gap) (bool, error) {
	cur, stop := g.Top, deref(g.AfterID)
	for range maxChainWalk {
		if cur == stop {
			return true, nil
		}
		er, err := erasedAt(tx, cur, tx.Clock())
		if err != nil || er == nil {
			return false, err
		}
		cur = deref(er.Prev)
	}
	return false, nil
}

// erasedAt returns the erased value of id when an erasure at or before
// clock erased it.
func erasedAt(tx *Tx, id records.ID, clock uint64) (*Erased, error) {
	if id.IsZero() {
		return nil, nil
	}
	v, err := tx.Get(Key{ModelErased, id.String()})
	if err != nil {
		return nil, err
	}
	if er, ok := v.(*Erased); ok && er.ErasureClock <= clock {
		return er, nil
	}
	return nil, nil
}

// historyPage is how many records firstAfter asks the log for at a time.
const historyPage = 64

// firstAfter returns the oldest record of thread after clock after that is
// not erased.
func firstAfter(tx *Tx, thread string, after uint64) (records.Entry, bool, error) {
	for {
		es, err := tx.After(thread, after, historyPage)
		if err != nil {
			return records.Entry{}, false, err
		}
		for _, e := range es {
			er, err := erasedAt(tx, e.ID, tx.Clock())
			if err != nil {
				return records.Entry{}, false, err
			}
			if er == nil {
				return e, true, nil
			}
			after = e.Clock
		}
		if len(es) < historyPage {
			return records.Entry{}, false, nil
		}
	}
}

// lastBefore returns the newest record of thread (of kind, any when "")
// before clock before that is not erased.
func lastBefore(tx *Tx, thread, kind string, before uint64) (records.Entry, bool, error) {
	for {
		e, ok, err := tx.Before(thread, kind, before)
		if err != nil || !ok {
			return records.Entry{}, false, err
		}
		er, err := erasedAt(tx, e.ID, tx.Clock())
		if err != nil {
			return records.Entry{}, false, err
		}
		if er == nil {
			return e, true, nil
		}
		before = e.Clock
	}
}

func deref(id *records.ID) records.ID {
	if id == nil {
		return records.ID{}
	}
	return *id
}

func sub1(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return n - 1
}

func decr(m map[string]uint64, k string) {
	switch n := m[k]; {
	case n > 1:
		m[k] = n - 1
	case n == 1:
		delete(m, k)
	}
}
