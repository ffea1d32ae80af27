package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// StateSet is one change a fork makes to the state it copies: the value
// at Path in the checkpoint's "state" map, set to Value. Path is a key of
// the state, or keys joined by dots ("context.branch") into nested maps,
// which are made where missing. Value is JSON, read with the strict
// reader of records (records.ValueFromJSON).
type StateSet struct {
	Path  string
	Value json.RawMessage
}

// ParseStateSet parses "key=value", the CLI's --set: the value is JSON
// when it is valid JSON (42, true, null, "x", [1,2], {"a":1}), else the
// text as given, a string. Valid JSON that the strict reader refuses
// (a duplicate key, 1e400) is an error, not a string.
func ParseStateSet(kv string) (StateSet, error) {
	path, value, ok := strings.Cut(kv, "=")
	if !ok {
		return StateSet{}, &records.FieldError{Field: "set", Rule: fmt.Sprintf("must be key=value, got %q", kv)}
	}
	if err := checkStatePath(path); err != nil {
		return StateSet{}, err
	}
	if json.Valid([]byte(value)) {
		return StateSet{Path: path, Value: json.RawMessage(value)}, nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return StateSet{}, &records.FieldError{Field: "set." + path, Rule: err.Error()}
	}
	return StateSet{Path: path, Value: b}, nil
}

// StateSets are the changes of a map from path to value, as the faces
// that take a fork's changes as a JSON object (HTTP, MCP) give them, in
// the order of their paths, so that a parent path is set before the paths
// under it. Each value is encoded as JSON (a json.RawMessage as it is).
func StateSets[V any](m map[string]V) ([]StateSet, error) {
	out := make([]StateSet, 0, len(m))
	for _, p := range slices.Sorted(maps.Keys(m)) {
		v, err := json.Marshal(m[p])
		if err != nil {
			return nil, &records.FieldError{Field: "set." + p, Rule: err.Error()}
		}
		out = append(out, StateSet{Path: p, Value: v})
	}
	return out, nil
}

// checkStatePath refuses an empty path or an empty key in it.
func checkStatePath(path string) error {
	if path == "" || strings.Contains("."+path+".", "..") {
		return &records.FieldError{Field: "set", Rule: fmt.Sprintf("key must be a name or names joined by dots, got %q", path)}
	}
	return nil
}

// ForkRequest is what Fork starts a new thread from.
type ForkRequest struct {
	From  string     // the source checkpoint on the source thread, as FindCheckpoint reads it ("": the latest)
	To    string     // the new thread: it must hold no record
	Set   []StateSet // changes to the copied state, in order
	Actor string     // empty: the client's actor
}

// Forked says what Fork did.
type Forked struct {
	Checkpoint SavedCheckpoint // the first checkpoint of the new thread
	From       SavedCheckpoint // the source checkpoint
	Note       Receipt         // the KindFork record on the source thread (zero when it failed)
}

// Fork starts thread req.To from a checkpoint of thread: the new
// thread's first record is a checkpoint with the source's summary,
// learnings, next steps, session id, state (changed by req.Set) and other
// body keys (not its name), whose parent is the source checkpoint and
// whose forked_from names it: {thread, id, clock}. Verify checks that
// link. Then a KindFork record on the source thread notes the fork, so
// that the source's lineage lists it. The first record lands only on an
// empty thread (a conditional append); otherwise nothing is written and
// the error is a *records.FieldError on "to".
//
// When the fork is written but its note is not, Fork returns the result
// with an error that says so.
func (c *Client) Fork(ctx context.Context, thread string, req ForkRequest) (Forked, error) {
	if err := records.CheckThread(req.To); err != nil {
		var fe *records.FieldError
		if errors.As(err, &fe) {
			return Forked{}, &records.FieldError{Field: "to", Rule: fe.Rule}
		}
		return Forked{}, err
	}
	if req.To == thread {
		return Forked{}, &records.FieldError{Field: "to", Rule: "must be a new thread, not the source thread"}
	}
	src, err := c.FindCheckpoint(ctx, thread, req.From)
	if err != nil {
		return Forked{}, fmt.Errorf("fork: %w", err)
	}
	cp := *src.Checkpoint
	cp.Name = ""
	cp.Extra = maps.Clone(cp.Extra)
	cp.State = maps.Clone(cp.State)
	for _, s := range req.Set {
		if cp.State, err = setState(cp.State, s); err != nil {
			return Forked{}, fmt.Errorf("fork: %w", err)
		}
	}
	cp.Parent = src.ID
	cp.ForkedFrom = &records.ForkLink{Thread: thread, ID: src.ID, Clock: src.Clock}
	rec, err := c.record(Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: req.To, Actor: req.Actor, Body: &cp})
	if err != nil {
		return Forked{}, fmt.Errorf("fork: %w", err)
	}
	// Append's one write path (redaction, then signing: a --set of a
	// covered key stores no value; then retention), on an empty thread
	// only.
	r, err := c.append(ctx, rec, true, 0)
	var re *RetentionError
	switch {
	case errors.Is(err, splog.ErrMoved):
		return Forked{}, &records.FieldError{Field: "to", Rule: fmt.Sprintf("thread %q already has records; a fork starts a new thread", req.To)}
	case err != nil && !errors.As(err, &re):
		return Forked{}, fmt.Errorf("fork: %w", err)
	}
	e := splog.Entry{ID: r.ID, Clock: r.Clock, Record: r.Record}
	out := Forked{From: src}
	if out.Checkpoint, err = savedCheckpoint(e); err != nil {
		return out, fmt.Errorf("fork: %w", err)
	}
	note, err := c.Emit(ctx, Event{Act: records.ActDo, Kind: KindFork, Thread: thread, Actor: rec.Header.Actor, Time: time.Now(),
		Body: map[string]any{"from_id": src.ID.String(), "from_clock": src.Clock, "to_thread": req.To, "to_id": e.ID.String()}})
	if err != nil {
		return out, fmt.Errorf("fork %s saved; its note on thread %q was not: %w", e.ID, thread, err)
	}
	out.Note = note
	if re != nil {
		return out, re // saved; its thread's retention failed, as Append says
	}
	return out, nil
}

// setState returns state with s applied (state is changed in place only
// in maps made here or cloned along the path).
func setState(state map[string]any, s StateSet) (map[string]any, error) {
	if err := checkStatePath(s.Path); err != nil {
		return nil, err
	}
	v, err := records.ValueFromJSON(s.Value, "set."+s.Path)
	if err != nil {
		return nil, err
	}
	if state == nil {
		state = make(map[string]any)
	}
	keys := strings.Split(s.Path, ".")
	m := state
	for i, k := range keys[:len(keys)-1] {
		var next map[string]any
		switch child := m[k].(type) {
		case nil:
			next = make(map[string]any)
		case map[string]any:
			next = maps.Clone(child)
		case map[any]any:
			next = make(map[string]any, len(child))
			for ck, cv := range child {
				cs, ok := ck.(string)
				if !ok {
					return nil, &records.FieldError{Field: "set." + s.Path, Rule: fmt.Sprintf("state.%s has a key that is not text", strings.Join(keys[:i+1], "."))}
				}
				next[cs] = cv
			}
		default:
			return nil, &records.FieldError{Field: "set." + s.Path,
				Rule: fmt.Sprintf("state.%s is not an object; cannot set a key in it", strings.Join(keys[:i+1], "."))}
		}
		m[k] = next
		m = next
	}
	m[keys[len(keys)-1]] = v
	return state, nil
}
