package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// Kinds of the lineage records the service layer writes beside
// checkpoints. Both are ordinary records (structural checks only).
const (
	// KindResume is the resume record: the session_resumed event
	// ResumeSession appends, whose body names the checkpoint taken up
	// ("checkpoint": id), so that the next checkpoint saved on the thread
	// is a child of that one.
	KindResume = records.KindSessionResumed
	// KindFork notes, on the source thread, that a fork started a new
	// thread from one of its checkpoints: {"from_id", "from_clock",
	// "to_thread", "to_id"}. The fork itself is the first checkpoint of
	// the new thread, whose forked_from names the source.
	KindFork = "agent.session.fork"
)

// headCache remembers, per thread, the checkpoint this client saved last
// and its clock. While that checkpoint is still the last record of its
// thread, it is the next checkpoint's parent (nothing was saved or resumed
// since, here or in another process), and SaveCheckpoint appends on that
// condition (log.AppendAfter) without reading the thread: the two gets of
// branchHead are then needed only after another record moved the thread.
type headCache struct {
	mu    sync.Mutex
	heads map[string]savedHead
}

type savedHead struct {
	id    records.ID
	clock uint64
}

// maxHeads bounds the threads a client remembers its last save of.
const maxHeads = 4096

func (h *headCache) get(thread string) (savedHead, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.heads[thread]
	return s, ok
}

func (h *headCache) saved(thread string, id records.ID, clock uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heads == nil || len(h.heads) >= maxHeads {
		h.heads = make(map[string]savedHead)
	}
	h.heads[thread] = savedHead{id, clock}
}

func (h *headCache) forget(thread string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.heads, thread)
}

// saveAfterOwn saves the checkpoint of ev (cp is its body) as the child
// of the checkpoint this client saved last on the thread, if that is
// still the thread's last record; else it appends nothing and returns an
// error wrapping log.ErrMoved (also when this client saved nothing there
// yet).
func (c *Client) saveAfterOwn(ctx context.Context, ev Event, cp *records.Checkpoint) (Record, error) {
	last, ok := c.heads.get(ev.Thread)
	if !ok {
		return Record{}, splog.ErrMoved
	}
	cp.Parent = last.id
	rec, err := c.record(ev)
	if err != nil {
		return Record{}, err
	}
	r, err := c.append(ctx, rec, true, last.clock)
	switch {
	case errors.Is(err, splog.ErrMoved):
		c.heads.forget(ev.Thread)
		cp.Parent = records.ID{}
	case err == nil, errors.As(err, new(*RetentionError)):
		c.heads.saved(ev.Thread, r.ID, r.headClock())
	}
	return r, err
}

// branchHead returns the checkpoint the next checkpoint saved to thread
// descends from, by the one rule (rules.Parent) over the thread's newest
// checkpoint and newest resume record that verify: the two gets go out
// together.
func (c *Client) branchHead(ctx context.Context, thread string) (records.ID, error) {
	var (
		resume    splog.Entry
		resumeErr error
		wg        sync.WaitGroup
	)
	wg.Go(func() { resume, _, resumeErr = c.log.LatestValid(ctx, thread, KindResume) })
	head, _, err := c.log.LatestValid(ctx, thread, records.KindCheckpoint)
	wg.Wait()
	var entries []rules.LineageEntry
	for _, r := range []struct {
		e   splog.Entry
		err error
	}{{head, err}, {resume, resumeErr}} {
		switch {
		case r.err == nil:
			entries = append(entries, lineageEntry(r.e))
		case !errors.Is(r.err, ErrNotFound):
			return records.ID{}, fmt.Errorf("parent of the checkpoint: %w", r.err)
		}
	}
	slices.SortFunc(entries, func(a, b rules.LineageEntry) int { return cmp.Compare(a.Clock, b.Clock) })
	return rules.Parent(entries, 0), nil
}

// lineageEntry is a checkpoint or resume record as rules.Parent weighs
// it.
func lineageEntry(e splog.Entry) rules.LineageEntry {
	if e.Record.Header.Kind != KindResume {
		return rules.LineageEntry{Clock: e.Clock, ID: e.ID}
	}
	id, _, _ := resumeTarget(e.Record.Body) // zero when it names none
	return rules.LineageEntry{Clock: e.Clock, ID: id, Resume: true}
}

// resumeTarget reads the checkpoint a resume record's body names.
func resumeTarget(body []byte) (records.ID, uint64, bool) {
	m, err := records.DecodeCheckpoint(body) // generic keys land in Extra
	if err != nil {
		return records.ID{}, 0, false
	}
	s, _ := m.Extra["checkpoint"].(string)
	id, err := records.ParseID(s)
	if err != nil {
		return records.ID{}, 0, false
	}
	clock, _ := m.Extra["clock"].(uint64)
	return id, clock, true
}

// minShortID is the fewest characters of an id's end that name a
// checkpoint (tables show 12).
const minShortID = 8

// FindCheckpoint returns the checkpoint of thread that ref names: its
// id, the end of its id (at least 8 characters, as tables show the last
// 12; it must name one checkpoint of the thread), or its name (the newest
// checkpoint of that name). ref "" is the latest checkpoint. A checkpoint
// that was erased is an *ErasedError; none is ErrNotFound.
func (c *Client) FindCheckpoint(ctx context.Context, thread, ref string) (SavedCheckpoint, error) {
	if ref == "" {
		return c.LatestCheckpoint(ctx, thread)
	}
	if id, err := records.ParseID(ref); err == nil {
		return c.CheckpointByID(ctx, thread, id)
	}
	m := refMatch{ref: ref}
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindCheckpoint)) {
		if errors.Is(err, records.ErrCorrupt) {
			continue
		}
		if err != nil {
			return SavedCheckpoint{}, fmt.Errorf("checkpoint %q of %q: %w", ref, thread, err)
		}
		if sc, err := savedCheckpoint(e); err == nil {
			m.add(sc)
		}
	}
	return m.result(thread)
}

// refMatch finds the checkpoint that ref names by the end of its id or
// by its name, as FindCheckpoint reads it, among the checkpoints added
// (oldest first).
type refMatch struct {
	ref    string
	byName *SavedCheckpoint  // the newest of that name
	byEnd  []SavedCheckpoint // those whose id ends with ref
}

func (m *refMatch) add(sc SavedCheckpoint) {
	if sc.Checkpoint.Name == m.ref {
		m.byName = &sc
	}
	if len(m.ref) >= minShortID && strings.HasSuffix(sc.ID.String(), m.ref) {
		m.byEnd = append(m.byEnd, sc)
	}
}

// result is the checkpoint ref names: one whose id it ends, else the
// newest of its name; ErrNotFound when none.
func (m *refMatch) result(thread string) (SavedCheckpoint, error) {
	switch {
	case len(m.byEnd) == 1:
		return m.byEnd[0], nil
	case len(m.byEnd) > 1:
		return SavedCheckpoint{}, &records.FieldError{Field: "checkpoint",
			Rule: fmt.Sprintf("%q ends %d checkpoint ids of thread %q; give more of the id", m.ref, len(m.byEnd), thread)}
	case m.byName != nil:
		return *m.byName, nil
	}
	return SavedCheckpoint{}, fmt.Errorf("no checkpoint %q (id, end of an id or name) on thread %q: %w", m.ref, thread, ErrNotFound)
}

// CheckpointByID returns the checkpoint id of thread, verified. An id
// that an erasure removed is an *ErasedError; a record that is not a
// checkpoint is a *records.FieldError on "id".
func (c *Client) CheckpointByID(ctx context.Context, thread string, id records.ID) (SavedCheckpoint, error) {
	r, err := c.Record(ctx, id, thread)
	if err != nil {
		return SavedCheckpoint{}, err
	}
	if k := r.Header.Kind; k != records.KindCheckpoint {
		return SavedCheckpoint{}, &records.FieldError{Field: "id",
			Rule: fmt.Sprintf("%s is a %s record, not a checkpoint", id, k)}
	}
	return savedCheckpoint(splog.Entry{ID: r.ID, Clock: r.Clock, Record: r.Record})
}

// CheckpointByName returns the newest checkpoint of thread named name.
func (c *Client) CheckpointByName(ctx context.Context, thread, name string) (SavedCheckpoint, error) {
	if name == "" {
		return SavedCheckpoint{}, &records.FieldError{Field: "name", Rule: "must not be empty"}
	}
	var found *SavedCheckpoint
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindCheckpoint)) {
		if errors.Is(err, records.ErrCorrupt) {
			continue
		}
		if err != nil {
			return SavedCheckpoint{}, fmt.Errorf("checkpoint named %q on %q: %w", name, thread, err)
		}
		if sc, err := savedCheckpoint(e); err == nil && sc.Checkpoint.Name == name {
			found = &sc
		}
	}
	if found == nil {
		return SavedCheckpoint{}, fmt.Errorf("no checkpoint named %q on thread %q: %w", name, thread, ErrNotFound)
	}
	return *found, nil
}

// Node types of a Lineage.
const (
	NodeCheckpoint = "checkpoint" // a checkpoint of the thread
	NodeResume     = "resume"     // a resume record: Parent is the checkpoint resumed
	NodeFork       = "fork"       // a fork from the thread: Parent is the source checkpoint
	NodeErased     = "erased"     // a checkpoint an erasure removed (its body is gone)
)

// LineageNode is one element of a thread's lineage.
type LineageNode struct {
	Type   string // NodeCheckpoint, NodeResume, NodeFork or NodeErased
	ID     records.ID
	Clock  uint64
	Time   time.Time
	Actor  string
	Parent records.ID // the checkpoint it descends from (zero: a root)
	// ImpliedParent says that a checkpoint's body names no parent (it
	// was saved before lineage, or written raw), so Parent is the
	// checkpoint before it on the thread.
	ImpliedParent bool
	Checkpoint    *records.Checkpoint // NodeCheckpoint: the body
	ToThread      string              // NodeFork: the new thread
	ToID          records.ID          // NodeFork: its first checkpoint
	ErasedBy      records.ID          // NodeErased: the erasure record
	Reason        string              // NodeErased: why
}

// Lineage is the tree of a thread's checkpoints: every node names its
// parent; roots have none (or one on another thread, for a fork).
type Lineage struct {
	Thread     string
	ForkedFrom *records.ForkLink // the thread's first checkpoint came from there
	Nodes      []LineageNode     // in clock order
	Corrupt    []uint64          // clocks of records that did not verify, left out
}

// Lineage reads the lineage of thread: its checkpoints with their
// parents, the resumes, the forks made from it, and the checkpoints
// erased. It reads the thread's records of those four kinds only. A
// checkpoint whose body names no parent gets the one the save would have
// chosen then (rules.Parent), marked ImpliedParent.
func (c *Client) Lineage(ctx context.Context, thread string) (Lineage, error) {
	out := Lineage{Thread: thread}
	var (
		nodes   []LineageNode
		entries []rules.LineageEntry // what rules.Parent weighs
	)
	for _, kind := range []string{records.KindCheckpoint, KindResume, KindFork} {
		for e, err := range c.log.Read(ctx, thread, splog.Kind(kind)) {
			var ce *splog.CorruptError
			if errors.As(err, &ce) {
				out.Corrupt = append(out.Corrupt, ce.Clock)
				continue
			}
			if err != nil {
				return out, fmt.Errorf("lineage of %q: %w", thread, err)
			}
			if kind != KindFork { // a record that verifies, whether its body reads or not
				entries = append(entries, lineageEntry(e))
			}
			n, ok := lineageNode(e)
			if !ok {
				out.Corrupt = append(out.Corrupt, e.Clock)
				continue
			}
			nodes = append(nodes, n)
		}
	}
	tombs, err := c.Tombstones(ctx, thread)
	if err != nil && len(tombs) == 0 {
		return out, fmt.Errorf("lineage of %q: %w", thread, err)
	}
	for _, t := range tombs {
		if t.Header.Kind != records.KindCheckpoint {
			continue
		}
		nodes = append(nodes, LineageNode{Type: NodeErased, ID: t.ID, Clock: t.Clock, Time: time.UnixMilli(t.Header.TS),
			Actor: t.Header.Actor, ErasedBy: t.ErasedBy.ID, Reason: t.Reason})
		if t.Clock != 0 { // an erasure that did not say where it was cannot be placed
			entries = append(entries, rules.LineageEntry{Clock: t.Clock, ID: t.ID, ErasedAt: t.ErasedBy.Clock})
		}
	}
	slices.SortStableFunc(nodes, func(a, b LineageNode) int { return cmp.Compare(a.Clock, b.Clock) })
	slices.SortStableFunc(entries, func(a, b rules.LineageEntry) int { return cmp.Compare(a.Clock, b.Clock) })
	for i := range nodes {
		n := &nodes[i]
		if n.Type != NodeCheckpoint {
			continue
		}
		if n.Parent.IsZero() && n.Checkpoint.ForkedFrom == nil {
			n.Parent = rules.Parent(entries, n.Clock)
			n.ImpliedParent = !n.Parent.IsZero()
		}
		if n.Checkpoint.ForkedFrom != nil && out.ForkedFrom == nil {
			out.ForkedFrom = n.Checkpoint.ForkedFrom
		}
	}
	out.Nodes = nodes
	slices.Sort(out.Corrupt)
	return out, nil
}

// lineageNode reads the node of a checkpoint, resume or fork record.
func lineageNode(e splog.Entry) (LineageNode, bool) {
	h := e.Record.Header
	n := LineageNode{ID: e.ID, Clock: e.Clock, Time: e.Record.Time(), Actor: h.Actor}
	switch h.Kind {
	case records.KindCheckpoint:
		cp, err := records.DecodeCheckpoint(e.Record.Body)
		if err != nil {
			return n, false
		}
		n.Type, n.Checkpoint, n.Parent = NodeCheckpoint, cp, cp.Parent
	case KindResume:
		id, _, ok := resumeTarget(e.Record.Body)
		if !ok {
			return n, false
		}
		n.Type, n.Parent = NodeResume, id
	case KindFork:
		m, err := records.DecodeCheckpoint(e.Record.Body)
		if err != nil {
			return n, false
		}
		from, err1 := records.ParseID(str(m.Extra["from_id"]))
		to, err2 := records.ParseID(str(m.Extra["to_id"]))
		if err1 != nil || err2 != nil {
			return n, false
		}
		n.Type, n.Parent, n.ToThread, n.ToID = NodeFork, from, str(m.Extra["to_thread"]), to
	}
	return n, true
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// verifyLinks checks the lineage links of thread's checkpoints and adds a
// problem to rep.Missing for each that does not hold:
//
//   - forked_from: the id is a checkpoint of the source thread at the
//     clock the link names, or an erasure record of the source thread
//     names it (the source's older records may be erased after a fork);
//   - parent: a checkpoint of the thread, an erased one, or the fork's
//     source.
//
// Checkpoints that do not verify are left to the log's own report.
func (c *Client) verifyLinks(ctx context.Context, thread string, rep *VerifyReport) error {
	ids := make(map[records.ID]bool)
	var cps []SavedCheckpoint
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindCheckpoint)) {
		if errors.Is(err, records.ErrCorrupt) {
			continue
		}
		if err != nil {
			return fmt.Errorf("verify links of %q: %w", thread, err)
		}
		if sc, err := savedCheckpoint(e); err == nil {
			ids[sc.ID] = true
			cps = append(cps, sc)
		}
	}
	erased := make(map[string]map[records.ID]bool) // thread → erased ids
	erasedOn := func(t string) (map[records.ID]bool, error) {
		if m, ok := erased[t]; ok {
			return m, nil
		}
		ts, err := c.Tombstones(ctx, t)
		if err != nil && len(ts) == 0 && !errors.Is(err, records.ErrCorrupt) {
			return nil, err
		}
		m := make(map[records.ID]bool, len(ts))
		for _, x := range ts {
			m[x.ID] = true
		}
		erased[t] = m
		return m, nil
	}
	// A record the log's walk already reports missing (a gap in the
	// chain) is reported once, not again for each link to it.
	reported := make(map[records.ID]bool, len(rep.Missing))
	for _, m := range rep.Missing {
		reported[m.ID] = true
	}
	problem := func(sc SavedCheckpoint, id records.ID, reason string) {
		if reported[id] {
			return
		}
		rep.Missing = append(rep.Missing, VerifyProblem{Clock: sc.Clock,
			Subject: splog.RecordSubject(thread, records.KindCheckpoint), ID: id, Reason: reason})
	}
	for _, sc := range cps {
		cp := sc.Checkpoint
		if l := cp.ForkedFrom; l != nil {
			reason, err := c.checkForkLink(ctx, *l, erasedOn)
			if err != nil {
				return fmt.Errorf("verify links of %q: %w", thread, err)
			}
			if reason != "" {
				problem(sc, l.ID, "forked_from: "+reason)
			}
		}
		if p := cp.Parent; !p.IsZero() && !ids[p] && (cp.ForkedFrom == nil || cp.ForkedFrom.ID != p) {
			gone, err := erasedOn(thread)
			if err != nil {
				return fmt.Errorf("verify links of %q: %w", thread, err)
			}
			if !gone[p] {
				problem(sc, p, fmt.Sprintf("parent %s is no checkpoint of the thread and no erasure names it", p))
			}
		}
	}
	return nil
}

// checkForkLink checks one fork link: "" when it holds, else why not.
func (c *Client) checkForkLink(ctx context.Context, l records.ForkLink, erasedOn func(string) (map[records.ID]bool, error)) (string, error) {
	e, err := c.log.Get(ctx, l.ID, l.Thread)
	switch {
	case err == nil:
		if e.Record.Header.Kind != records.KindCheckpoint {
			return fmt.Sprintf("%s on thread %q is a %s record, not a checkpoint", l.ID, l.Thread, e.Record.Header.Kind), nil
		}
		if e.Clock != l.Clock {
			return fmt.Sprintf("%s on thread %q is at clock %d, the link says %d", l.ID, l.Thread, e.Clock, l.Clock), nil
		}
		return "", nil
	case errors.Is(err, records.ErrCorrupt):
		return fmt.Sprintf("%s on thread %q does not verify", l.ID, l.Thread), nil
	case !errors.Is(err, ErrNotFound):
		return "", err
	}
	gone, err := erasedOn(l.Thread)
	if err != nil {
		return "", err
	}
	if gone[l.ID] {
		return "", nil
	}
	return fmt.Sprintf("source %s is not on thread %q and no erasure there names it", l.ID, l.Thread), nil
}

// verifyAllLinks checks the lineage links of every thread with
// checkpoints.
func (c *Client) verifyAllLinks(ctx context.Context, rep *VerifyReport) error {
	threads, err := c.threadsWith(ctx, records.KindCheckpoint)
	if err != nil {
		return fmt.Errorf("verify links: %w", err)
	}
	for _, t := range threads {
		if err := c.verifyLinks(ctx, t, rep); err != nil {
			return err
		}
	}
	return nil
}

// Facts are the well-known values a checkpoint's body may carry beside
// its fields, for listings: each is looked up at the body's top level,
// then in "state", then in "metadata"; absent, it is empty (nil).
type Facts struct {
	Step     string // "step", else "step_number", else "step_name"
	Progress string // "progress", else "estimated_completion"
	Clean    *bool  // "is_clean"
}

// FactsOf returns the facts of checkpoint body cp.
func FactsOf(cp *records.Checkpoint) Facts {
	if cp == nil {
		return Facts{}
	}
	look := func(key string) (any, bool) {
		if v, ok := cp.Extra[key]; ok {
			return v, true
		}
		if v, ok := cp.State[key]; ok {
			return v, true
		}
		if md, ok := cp.Extra["metadata"].(map[any]any); ok {
			v, ok := md[key]
			return v, ok
		}
		return nil, false
	}
	text := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := look(k); ok {
				switch v := v.(type) {
				case string:
					return v
				case uint64, int64, float64, bool:
					return fmt.Sprint(v)
				}
			}
		}
		return ""
	}
	f := Facts{Step: text("step", "step_number", "step_name"), Progress: text("progress", "estimated_completion")}
	if v, ok := look("is_clean"); ok {
		if b, ok := v.(bool); ok {
			f.Clean = &b
		}
	}
	return f
}

// RecordID resolves ref, a record's id or the end of one (at least
// minShortID characters, as the CLI's tables print it), to the id of a
// record of thread. The end of an id is looked for in the id headers of
// the thread's messages, or without thread of every thread's (the whole
// log is read); one that ends several ids is a *records.FieldError
// naming them (up to five) and asking for more of it, one that ends none
// ErrNotFound.
func (c *Client) RecordID(ctx context.Context, thread, ref string) (records.ID, error) {
	id, err := records.ParseID(ref)
	if err == nil {
		return id, nil
	}
	if len(ref) < minShortID {
		return records.ID{}, fmt.Errorf("id %q: %w", ref, err)
	}
	const shown = 5
	found, err := c.log.IDsEnding(ctx, thread, ref, shown+1)
	if err != nil {
		return records.ID{}, fmt.Errorf("id %q: %w", ref, err)
	}
	where := "every thread"
	if thread != "" {
		where = fmt.Sprintf("thread %q", thread)
	}
	switch len(found) {
	case 0:
		return records.ID{}, fmt.Errorf("no record of %s has an id ending %q: %w", where, ref, ErrNotFound)
	case 1:
		return found[0], nil
	}
	n := strconv.Itoa(len(found))
	if len(found) > shown {
		found, n = found[:shown], "more than "+strconv.Itoa(shown)
	}
	return records.ID{}, &records.FieldError{Field: "id", Rule: fmt.Sprintf("%q ends %s record ids of %s (%s); give more of the id", ref, n, where, idList(found))}
}

// idList is ids for an error message, comma-separated.
func idList(ids []records.ID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ", ")
}
