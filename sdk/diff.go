package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spl-dev/spl/records"
)

// Operations of a DiffChange.
const (
	DiffAdded   = "added"   // in B only: a key, or a list item
	DiffRemoved = "removed" // in A only
	DiffChanged = "changed" // a key in both, with another value (or type)
)

// DiffChange is one difference between two checkpoint bodies.
type DiffChange struct {
	Op   string // DiffAdded, DiffRemoved or DiffChanged
	Path string // where, in the body's JSON form: "summary", "state.todos[2]", "learnings[0]"
	Old  json.RawMessage
	New  json.RawMessage // JSON; Old absent for added, New for removed
}

// Diff is the structured difference of two checkpoints' bodies.
type Diff struct {
	A, B    SavedCheckpoint
	Changes []DiffChange // by path
}

// DiffCheckpoints compares the bodies of checkpoints a and b in their
// JSON form (records.BodyToJSON): keys of maps added, removed and
// changed, recursively; lists compared as collections, each item of a
// list in a that b lacks removed (its index in a), each one of b that a
// lacks added (its index in b), counting repeats; other values changed
// when their JSON differs. It reads nothing.
func DiffCheckpoints(a, b SavedCheckpoint) (Diff, error) {
	av, err := bodyValue(a)
	if err != nil {
		return Diff{}, err
	}
	bv, err := bodyValue(b)
	if err != nil {
		return Diff{}, err
	}
	d := Diff{A: a, B: b}
	diffValues(&d.Changes, "", av, bv)
	return d, nil
}

// bodyValue is the body of sc as a generic JSON value (numbers kept as
// written).
func bodyValue(sc SavedCheckpoint) (any, error) {
	j, err := records.BodyToJSON(sc.Body)
	if err != nil {
		return nil, fmt.Errorf("diff: checkpoint %s: %w", sc.ID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("diff: checkpoint %s: %w", sc.ID, err)
	}
	return v, nil
}

func jsonOf(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values decoded from JSON encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func diffValues(out *[]DiffChange, path string, a, b any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range am {
				if !yield(k) {
					return
				}
			}
			for k := range bm {
				if _, dup := am[k]; !dup && !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			av, ina := am[k]
			bv, inb := bm[k]
			switch {
			case !inb:
				*out = append(*out, DiffChange{Op: DiffRemoved, Path: child(path, k), Old: jsonOf(av)})
			case !ina:
				*out = append(*out, DiffChange{Op: DiffAdded, Path: child(path, k), New: jsonOf(bv)})
			default:
				diffValues(out, child(path, k), av, bv)
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		diffLists(out, path, al, bl)
		return
	}
	if aj, bj := jsonOf(a), jsonOf(b); !bytes.Equal(aj, bj) {
		*out = append(*out, DiffChange{Op: DiffChanged, Path: path, Old: aj, New: bj})
	}
}

// diffLists compares two lists as collections of items (by their JSON).
func diffLists(out *[]DiffChange, path string, a, b []any) {
	count := make(map[string]int)
	for _, v := range b {
		count[string(jsonOf(v))]++
	}
	for i, v := range a {
		k := string(jsonOf(v))
		if count[k] > 0 {
			count[k]--
			continue
		}
		*out = append(*out, DiffChange{Op: DiffRemoved, Path: fmt.Sprintf("%s[%d]", path, i), Old: json.RawMessage(k)})
	}
	count = make(map[string]int)
	for _, v := range a {
		count[string(jsonOf(v))]++
	}
	for i, v := range b {
		k := string(jsonOf(v))
		if count[k] > 0 {
			count[k]--
			continue
		}
		*out = append(*out, DiffChange{Op: DiffAdded, Path: fmt.Sprintf("%s[%d]", path, i), New: json.RawMessage(k)})
	}
}

// String is the change as one line: "+ path: new", "- path: old",
// "~ path: old → new".
func (c DiffChange) String() string {
	var b strings.Builder
	switch c.Op {
	case DiffAdded:
		fmt.Fprintf(&b, "+ %s: %s", c.Path, c.New)
	case DiffRemoved:
		fmt.Fprintf(&b, "- %s: %s", c.Path, c.Old)
	default:
		fmt.Fprintf(&b, "~ %s: %s → %s", c.Path, c.Old, c.New)
	}
	return b.String()
}

// DiffRefs diffs checkpoint a of thread and checkpoint b of bThread
// (thread when empty), each named as FindCheckpoint reads it: the diff of
// GET /v1/threads/{thread}/diff and of the MCP tool diff_checkpoints.
func (c *Client) DiffRefs(ctx context.Context, thread, a, bThread, b string) (Diff, error) {
	if a == "" || b == "" {
		return Diff{}, &records.FieldError{Field: "a", Rule: "a and b are required: ids, ends of ids or names"}
	}
	ca, err := c.FindCheckpoint(ctx, thread, a)
	if err != nil {
		return Diff{}, fmt.Errorf("a: %w", err)
	}
	if bThread == "" {
		bThread = thread
	}
	cb, err := c.FindCheckpoint(ctx, bThread, b)
	if err != nil {
		return Diff{}, fmt.Errorf("b: %w", err)
	}
	return DiffCheckpoints(ca, cb)
}
