package fold

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spl-dev/spl/records"
)

// Key names one value of a read model.
type Key struct {
	Model string // the read model, e.g. ModelThreads
	Key   string // a KV key: [-/_=.a-zA-Z0-9]+, not starting or ending with '.'
}

// String returns "model/key".
func (k Key) String() string { return k.Model + "/" + k.Key }

// Value is one value of a read model as a fold holds it. It is stored as
// its encoding/json encoding, which must be deterministic for the type
// (structs, and maps, whose keys encoding/json sorts): a rebuilt read
// model is compared with the live one byte for byte.
type Value interface {
	// Applied is the clock of the last entry that changed the value.
	// Apply must leave a value alone for an entry at or below it: that is
	// what makes re-applying entries after a crash change nothing.
	Applied() uint64
}

// Fold is a projection's logic: a pure fold of log entries into read
// models. Apply reads the read models and, for the rare entry that needs
// it (an erasure), the log before the entry, only through its *Tx; it does
// no other I/O and reads no clock (the time of a record is its header's
// ts). The same entries folded from the same state give the same values,
// whatever the batches, restarts and processes.
type Fold interface {
	// Name names the projection; its position, lease and status are kept
	// under it.
	Name() string
	// Models names the read models Apply writes.
	Models() []string
	// Decode decodes a stored value of model.
	Decode(model string, data []byte) (Value, error)
	// Keys calls add with the keys Apply will read for e, so that a batch
	// loads them in one round trip. It is a hint: Apply may read others,
	// which are then loaded one by one.
	Keys(e records.Entry, add func(Key))
	// Apply folds e into the read models through tx. An error drops the
	// changes not yet stored, which are then applied again from the
	// stored position.
	Apply(tx *Tx, e records.Entry) error
}

// History is the log before an entry, for a fold that needs more than its
// read models (the fallbacks of an erasure). Every method considers only
// records at clocks below before, so that an answer does not depend on
// when it is asked, and skips messages that do not verify, as the
// runtime does.
type History interface {
	// Find returns the clock of the record id, of kind on thread, with
	// after < clock < before; 0 when there is none.
	Find(ctx context.Context, thread, kind string, id records.ID, after, before uint64) (uint64, error)
	// After returns up to n records of thread with after < clock < before,
	// oldest first.
	After(ctx context.Context, thread string, after, before uint64, n int) ([]records.Entry, error)
	// Before returns the newest record of thread with clock < before, of
	// kind (any kind when kind is ""); ok is false when there is none.
	Before(ctx context.Context, thread, kind string, before uint64) (e records.Entry, ok bool, err error)
}

// Stored is a value as a Store holds it. Data is nil when the key has no
// value; Rev is then the revision of its deletion, or 0.
type Stored struct {
	Data []byte
	Rev  uint64
}

// Write is one change of a commit: Data nil deletes the key. It lands
// only if the key is still at revision Expect (0: no value ever).
type Write struct {
	Key    Key
	Data   []byte
	Expect uint64
}

// ErrConflict reports a write that found its key, or the position, at
// another revision than expected: another projector wrote meanwhile. The
// runtime drops what it holds and starts again from the stored position.
var ErrConflict = errors.New("spl/projections: conflicting write")

// Store holds read models: JetStream KV buckets in the runtime, memory in
// tests.
type Store interface {
	// Load returns the stored values of keys, in order.
	Load(ctx context.Context, keys []Key) ([]Stored, error)
	// Commit applies writes, each only if its key is still at its
	// expected revision, and returns the new revisions in order. A failed
	// expectation is an error wrapping ErrConflict; writes to other models
	// may have landed before it.
	Commit(ctx context.Context, writes []Write) ([]uint64, error)
}

// Tx is what Fold.Apply reads and changes for one entry: the read models
// as the entries before it left them, and the log before it. Changes stay
// in memory (in the State) until the runtime stores them, with those of
// the other batches it holds.
type Tx struct {
	ctx   context.Context
	s     *State
	clock uint64
	err   error // of a Put that had to load
}

// Clock is the clock of the entry being applied.
func (tx *Tx) Clock() uint64 { return tx.clock }

// Get returns the value of k, nil when it has none.
func (tx *Tx) Get(k Key) (Value, error) {
	sl, err := tx.s.slot(tx.ctx, k)
	if err != nil {
		return nil, err
	}
	return sl.v, nil
}

// Put sets the value of k. A fold that changes a value it got from Get
// must Put it, or the change is not stored.
func (tx *Tx) Put(k Key, v Value) {
	sl, err := tx.s.slot(tx.ctx, k) // its revision, when k was never read
	if err != nil {
		tx.err = err
		return
	}
	sl.v, sl.at = v, tx.clock
	tx.s.markDirty(k, sl)
}

// Delete removes the value of k.
func (tx *Tx) Delete(k Key) { tx.Put(k, nil) }

// Find is History.Find before the entry.
func (tx *Tx) Find(thread, kind string, id records.ID, after uint64) (uint64, error) {
	return tx.s.hist.Find(tx.ctx, thread, kind, id, after, tx.clock)
}

// After is History.After before the entry.
func (tx *Tx) After(thread string, after uint64, n int) ([]records.Entry, error) {
	return tx.s.hist.After(tx.ctx, thread, after, tx.clock, n)
}

// Before is History.Before, bounded by the entry as well as by before.
func (tx *Tx) Before(thread, kind string, before uint64) (records.Entry, bool, error) {
	return tx.s.hist.Before(tx.ctx, thread, kind, min(before, tx.clock))
}

// slot is a value in the cache of a State.
type slot struct {
	v     Value  // nil: no value
	rev   uint64 // revision in the store
	at    uint64 // clock of the change, while dirty
	dirty bool
}

// State is a projection's read models as a runtime holds them: values
// loaded from the store, and the changes of the batches applied since the
// last store (one, or several while the consumer has more pending). It is
// dropped whole when applying or storing fails, so it never holds what
// the store does not, except those changes. A runtime applies batches
// (Apply), takes the changes (Changes), commits them to the Store itself
// and says so (Committed), then stores its position and moves the base
// (SetBase). A State is not safe for concurrent use.
type State struct {
	fold  Fold
	store Store
	hist  History
	slots map[Key]*slot
	dirty []Key // the keys of the dirty slots
	// base is the position as last stored (when the runtime started, or
	// at its last store). A loaded value applied beyond it is none of
	// the held changes, which stay cached until stored: it was stored by
	// a store whose position never was (a crash), and is written again
	// so that the order of the KV streams follows the clocks again.
	base uint64
	// empty says the store holds no value the cache does not (after a
	// reset): misses need no load.
	empty bool
	max   int // values kept after a store
}

// NewState returns the state of fold f over the models in st, with h as
// the log before each entry, keeping up to cacheSize values after each
// store (0: no bound). Its base is 0: call SetBase with the stored
// position.
func NewState(f Fold, st Store, h History, cacheSize int) *State {
	return &State{fold: f, store: st, hist: h, slots: make(map[Key]*slot), max: cacheSize}
}

// SetBase sets the position as last stored: the clock up to which the
// store holds every change.
func (s *State) SetBase(clock uint64) { s.base = clock }

// Emptied tells s that the store holds no value it does not cache (its
// models were just emptied): a key not cached needs no load.
func (s *State) Emptied() { s.empty = true }

// Held returns how many values changed since the last store.
func (s *State) Held() int { return len(s.dirty) }

// slot returns the cache slot of k, loading it when missing.
func (s *State) slot(ctx context.Context, k Key) (*slot, error) {
	if sl := s.slots[k]; sl != nil {
		return sl, nil
	}
	if err := s.load(ctx, []Key{k}); err != nil {
		return nil, err
	}
	return s.slots[k], nil
}

// load loads the keys that are not cached, in one call of the store.
func (s *State) load(ctx context.Context, keys []Key) error {
	var miss []Key
	for _, k := range keys {
		if s.slots[k] == nil {
			if s.empty {
				s.slots[k] = &slot{}
				continue
			}
			miss = append(miss, k)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	got, err := s.store.Load(ctx, miss)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for i, k := range miss {
		if s.slots[k] != nil { // a key twice in miss
			continue
		}
		sl := &slot{rev: got[i].Rev}
		if got[i].Data != nil {
			v, err := s.fold.Decode(k.Model, got[i].Data)
			if err != nil {
				return fmt.Errorf("decode %s (revision %d): %w", k, got[i].Rev, err)
			}
			sl.v = v
			s.slots[k] = sl
			if a := v.Applied(); a > s.base {
				sl.at = a
				s.markDirty(k, sl)
			}
			continue
		}
		s.slots[k] = sl
	}
	return nil
}

// Apply folds entries, in clock order, loading first the keys they name.
func (s *State) Apply(ctx context.Context, entries []records.Entry) error {
	var keys []Key
	seen := make(map[Key]struct{})
	for _, e := range entries {
		s.fold.Keys(e, func(k Key) {
			if _, ok := seen[k]; !ok && s.slots[k] == nil {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		})
	}
	if err := s.load(ctx, keys); err != nil {
		return err
	}
	tx := &Tx{ctx: ctx, s: s}
	for _, e := range entries {
		tx.clock = e.Clock
		err := s.fold.Apply(tx, e)
		if err == nil {
			err = tx.err
		}
		if err != nil {
			return fmt.Errorf("apply clock %d: %w", e.Clock, err)
		}
	}
	return nil
}

// markDirty notes that the slot of k holds a change to store.
func (s *State) markDirty(k Key, sl *slot) {
	if !sl.dirty {
		sl.dirty = true
		s.dirty = append(s.dirty, k)
	}
}

// Changes returns the writes of the changes held since the last store,
// whatever the batches that made them, in the order of the clocks that
// made them (then model and key), so that each KV stream holds its keys in
// the order of their last change.
func (s *State) Changes() ([]Write, error) {
	type change struct {
		k  Key
		sl *slot
	}
	cs := make([]change, len(s.dirty))
	for i, k := range s.dirty {
		cs[i] = change{k, s.slots[k]}
	}
	slices.SortFunc(cs, func(a, b change) int {
		if a.sl.at != b.sl.at {
			return cmp.Compare(a.sl.at, b.sl.at)
		}
		if a.k.Model != b.k.Model {
			return strings.Compare(a.k.Model, b.k.Model)
		}
		return strings.Compare(a.k.Key, b.k.Key)
	})
	ws := make([]Write, len(cs))
	buf := make([]byte, 0, 512*len(cs))
	for i, c := range cs {
		ws[i] = Write{Key: c.k, Expect: c.sl.rev}
		switch v := c.sl.v.(type) {
		case nil:
		case jsonAppender:
			start := len(buf)
			buf = v.appendJSON(buf)
			ws[i].Data = buf[start:len(buf):len(buf)]
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", c.k, err)
			}
			ws[i].Data = b
		}
	}
	return ws, nil
}

// Committed records the revisions of the writes of Changes, as the
// Store's Commit returned them, and trims the cache.
func (s *State) Committed(ws []Write, revs []uint64) {
	for i, w := range ws {
		if sl := s.slots[w.Key]; sl != nil {
			sl.rev, sl.dirty = revs[i], false
		}
	}
	s.dirty = s.dirty[:0]
	if s.max > 0 && len(s.slots) > s.max {
		// Forget about half, in map order (random enough): the batches
		// to come load what they need again.
		n := len(s.slots) - s.max/2
		for k, sl := range s.slots {
			if n == 0 {
				break
			}
			if !sl.dirty {
				delete(s.slots, k)
				n--
			}
		}
		s.empty = false
	}
}
