package fold

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/spl-dev/spl/records"
)

// MemoryStore is a Store in memory, for tests: each model keeps a
// revision counter, as a KV stream keeps a sequence, and a commit lands
// whole or not at all.
type MemoryStore struct {
	mu   sync.Mutex
	vals map[Key]Stored
	revs map[string]uint64
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{vals: make(map[Key]Stored), revs: make(map[string]uint64)}
}

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, keys []Key) ([]Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Stored, len(keys))
	for i, k := range keys {
		out[i] = m.vals[k]
	}
	return out, nil
}

// Commit implements Store.
func (m *MemoryStore) Commit(_ context.Context, ws []Write) ([]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range ws {
		if got := m.vals[w.Key].Rev; got != w.Expect {
			return nil, fmt.Errorf("%s: revision %d, expected %d: %w", w.Key, got, w.Expect, ErrConflict)
		}
	}
	revs := make([]uint64, len(ws))
	for i, w := range ws {
		m.revs[w.Key.Model]++
		revs[i] = m.revs[w.Key.Model]
		m.vals[w.Key] = Stored{Data: w.Data, Rev: revs[i]}
	}
	return revs, nil
}

// Dump returns every value, keyed by model and key.
func (m *MemoryStore) Dump() map[Key][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[Key][]byte, len(m.vals))
	for k, v := range m.vals {
		if v.Data != nil {
			out[k] = v.Data
		}
	}
	return out
}

// MemoryLog is a History in memory, for tests: entries in clock order,
// some of which may be deleted (as an erasure will physically delete
// records).
type MemoryLog struct {
	mu      sync.Mutex
	entries []records.Entry
	deleted map[uint64]bool
}

var _ History = (*MemoryLog)(nil)

// Append adds e, whose clock must be above every clock in the log.
func (m *MemoryLog) Append(e records.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.entries); n > 0 && m.entries[n-1].Clock >= e.Clock {
		return fmt.Errorf("memory log: clock %d after clock %d", e.Clock, m.entries[n-1].Clock)
	}
	m.entries = append(m.entries, e)
	return nil
}

// Delete removes the record at clock c.
func (m *MemoryLog) Delete(c uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleted == nil {
		m.deleted = make(map[uint64]bool)
	}
	m.deleted[c] = true
}

// Entries returns the records that are not deleted, in clock order.
func (m *MemoryLog) Entries() []records.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]records.Entry, 0, len(m.entries))
	for _, e := range m.entries {
		if !m.deleted[e.Clock] {
			out = append(out, e)
		}
	}
	return out
}

// scan calls fn with the live entries with after < clock < before, in
// order, until fn returns false.
func (m *MemoryLog) scan(after, before uint64, fn func(records.Entry) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.entries), func(i int) bool { return m.entries[i].Clock > after })
	for ; i < len(m.entries) && m.entries[i].Clock < before; i++ {
		if !m.deleted[m.entries[i].Clock] && !fn(m.entries[i]) {
			return
		}
	}
}

// Find implements History.
func (m *MemoryLog) Find(_ context.Context, thread, kind string, id records.ID, after, before uint64) (uint64, error) {
	var c uint64
	m.scan(after, before, func(e records.Entry) bool {
		if e.ID == id && e.Record.Header.Thread == thread && e.Record.Header.Kind == kind {
			c = e.Clock
			return false
		}
		return true
	})
	return c, nil
}

// After implements History.
func (m *MemoryLog) After(_ context.Context, thread string, after, before uint64, n int) ([]records.Entry, error) {
	var out []records.Entry
	m.scan(after, before, func(e records.Entry) bool {
		if e.Record.Header.Thread == thread {
			out = append(out, e)
		}
		return len(out) < n
	})
	return out, nil
}

// Before implements History.
func (m *MemoryLog) Before(_ context.Context, thread, kind string, before uint64) (records.Entry, bool, error) {
	var found records.Entry
	ok := false
	m.scan(0, before, func(e records.Entry) bool {
		if e.Record.Header.Thread == thread && (kind == "" || e.Record.Header.Kind == kind) {
			found, ok = e, true
		}
		return true
	})
	return found, ok, nil
}

// FoldMemory folds entries (in clock order) into a new MemoryStore in
// batches of batch entries, with the records of hist as the log before
// each entry, and returns the store. It is the runtime without JetStream:
// tests compare its result with read models built in KV.
func FoldMemory(ctx context.Context, f Fold, hist History, entries []records.Entry, batch int) (*MemoryStore, error) {
	st := NewMemoryStore()
	s := NewState(f, st, hist, 0)
	s.Emptied()
	for chunk := range slices.Chunk(entries, max(batch, 1)) {
		if err := s.Apply(ctx, chunk); err != nil {
			return nil, err
		}
		ws, err := s.Changes()
		if err != nil {
			return nil, err
		}
		revs, err := st.Commit(ctx, ws)
		if err != nil {
			return nil, err
		}
		s.Committed(ws, revs)
		s.SetBase(chunk[len(chunk)-1].Clock)
	}
	return st, nil
}
