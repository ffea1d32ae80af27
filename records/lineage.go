package records

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// Checkpoint body keys of lineage (wire format; never change). They are
// optional: a checkpoint without them is the checkpoint it always was.
const (
	keyParent     = "parent"      // text: the id of the previous checkpoint of the branch
	keyState      = "state"       // map: structured state (phases, decisions, todos, …)
	keyForkedFrom = "forked_from" // map: {thread, id, clock} of the checkpoint a fork starts from
)

// ForkLink names the checkpoint a fork starts from, on another thread:
// the body key "forked_from", a map {"thread": text, "id": text (the
// record id), "clock": unsigned integer}. Verification checks it across
// threads (the id is on Thread, or an erasure record there names it).
type ForkLink struct {
	Thread string // the source thread
	ID     ID     // the source checkpoint
	Clock  uint64 // where it was in the log
}

// cbor returns l as the generic map it encodes as.
func (l *ForkLink) cbor() map[string]any {
	return map[string]any{"thread": l.Thread, "id": l.ID.String(), "clock": l.Clock}
}

// validate checks l's fields, naming them under field.
func (l *ForkLink) validate(field string) error {
	if rule := threadRule(l.Thread); rule != "" {
		return fieldErrorf(field+".thread", "%s", rule)
	}
	if l.ID.IsZero() {
		return fieldErrorf(field+".id", "must be a record id")
	}
	if l.Clock == 0 {
		return fieldErrorf(field+".clock", "must be at least 1")
	}
	return nil
}

// decodeLineageKey decodes the value v of lineage key k into c and
// reports whether it fits the key's type. A value that does not fit
// (stored before the key had a meaning) stays in Extra, so that reading
// never fails on it and re-encoding gives the same bytes; Validate, the
// rule for writing, refuses it.
func (c *Checkpoint) decodeLineageKey(k string, v any) bool {
	switch k {
	case keyParent:
		id, ok := canonicalID(v)
		if ok {
			c.Parent = id
		}
		return ok
	case keyState:
		m, ok := textKeyed(v)
		if ok {
			c.State = m
		}
		return ok
	case keyForkedFrom:
		l, err := forkLinkOf(keyForkedFrom, v)
		if err == nil {
			c.ForkedFrom = l
		}
		return err == nil
	}
	return false
}

// isLineageKey reports whether k is a lineage key.
func isLineageKey(k string) bool {
	return k == keyParent || k == keyState || k == keyForkedFrom
}

// canonicalID returns v as an id when it is a text string in the id's
// canonical text form.
func canonicalID(v any) (ID, bool) {
	s, ok := v.(string)
	if !ok {
		return ID{}, false
	}
	id, err := ParseID(s)
	return id, err == nil && id.String() == s
}

// textKeyed returns a generic map whose keys are all text strings as a
// map[string]any (the same canonical bytes once encoded).
func textKeyed(v any) (map[string]any, bool) {
	m, ok := v.(map[any]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		s, ok := k.(string)
		if !ok {
			return nil, false
		}
		out[s] = e
	}
	return out, true
}

// forkLinkOf converts the generic value of "forked_from", naming what is
// wrong under field.
func forkLinkOf(field string, v any) (*ForkLink, error) {
	m, ok := v.(map[any]any)
	if !ok {
		return nil, fieldErrorf("body."+field, "must be a map {thread, id, clock}, got %s", goCBORType(v))
	}
	l := &ForkLink{}
	for k, e := range m {
		ks, _ := k.(string)
		switch ks {
		case "thread":
			s, ok := e.(string)
			if !ok {
				return nil, fieldErrorf("body."+field+".thread", "must be a text string, got %s", goCBORType(e))
			}
			l.Thread = s
		case "id":
			id, ok := canonicalID(e)
			if !ok {
				return nil, fieldErrorf("body."+field+".id", "must be a record id in its text form (b…)")
			}
			l.ID = id
		case "clock":
			n, ok := e.(uint64)
			if !ok {
				return nil, fieldErrorf("body."+field+".clock", "must be an unsigned integer, got %s", goCBORType(e))
			}
			l.Clock = n
		default:
			return nil, fieldErrorf("body."+field, "unknown key %v: only thread, id and clock", k)
		}
	}
	if len(m) != 3 {
		return nil, fieldErrorf("body."+field, "must hold thread, id and clock")
	}
	if err := l.validate("body." + field); err != nil {
		return nil, err
	}
	return l, nil
}

// validateLineage checks the lineage fields of c, and refuses a lineage
// key left in Extra (a value of the wrong type) naming the rule it breaks.
func (c *Checkpoint) validateLineage() error {
	if c.ForkedFrom != nil {
		if err := c.ForkedFrom.validate("body." + keyForkedFrom); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.State)) {
		if !utf8.ValidString(k) {
			return fieldErrorf("body.state", "keys must be valid UTF-8")
		}
	}
	for _, k := range []string{keyForkedFrom, keyParent, keyState} {
		v, ok := c.Extra[k]
		if !ok {
			continue
		}
		switch k {
		case keyParent:
			if s, ok := v.(string); ok {
				if _, err := ParseID(s); err != nil {
					var fe *FieldError
					if errors.As(err, &fe) {
						return fieldErrorf("body.parent", "%s", fe.Rule)
					}
				}
			}
			return fieldErrorf("body.parent", "must be a record id in its text form (b…), got %s", goCBORType(v))
		case keyState:
			return fieldErrorf("body.state", "must be a map with text keys (a JSON object), got %s", goCBORType(v))
		default:
			if _, err := forkLinkOf(k, v); err != nil {
				return err
			}
			return fieldErrorf("body."+k, "set it on Checkpoint.ForkedFrom, not in Extra")
		}
	}
	return nil
}

// String returns the link as "thread@id (clock n)".
func (l ForkLink) String() string {
	return fmt.Sprintf("%s@%s (clock %d)", l.Thread, l.ID, l.Clock)
}

// ValueFromJSON reads one JSON value (an object, an array, a string, a
// number, true, false or null) with the strict reader of BodyFromJSON
// and returns it as a generic value that a body may hold (a Checkpoint's
// State, for one). A value the rules refuse is a *FieldError naming its
// path under field; input that is not one JSON value is a *FieldError on
// field.
func ValueFromJSON(data []byte, field string) (any, error) {
	v, err := readJSON(data, field)
	if err != nil {
		var se *jsonSyntaxError
		if errors.As(err, &se) {
			return nil, fieldErrorf(field, "must be a JSON value: %s", se.msg)
		}
		return nil, err
	}
	return v, nil
}
