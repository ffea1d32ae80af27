package records

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// KindRedaction is a redaction policy; its body is a [Redaction]. It is
// written with act [ActKnow].
const KindRedaction = "core.redaction"

// RedactionThread is the reserved thread that holds the redaction policy
// of all threads: the only thread where a [Redaction] of scope [ScopeAll]
// may be written, and where one of scope [ScopeThread] may not.
const RedactionThread = "spl/redaction"

// RedactedKey is the body key that lists, sorted, the paths of the values
// a redaction policy removed from a body before it was sealed
// ("shared_memory.api_key", "items[2].token").
const RedactedKey = "redacted"

// Redaction body keys (wire format; never change).
const (
	keyKeys     = "keys"
	keyPatterns = "patterns"
)

// Redaction is the body of a [KindRedaction] record (act [ActKnow]): which
// keys of a body never reach the log. A key matches a map key at any
// depth of a body by name (case-insensitive), or, when it holds a dot,
// the key's whole path ("shared_memory.api_key"); a pattern matches the
// same way with path.Match syntax ("*_token", "secret*"). Empty lists are
// a policy that removes nothing (the way to lift one). It encodes as the
// map {"scope": text, "keys": [text], "patterns": [text]}; no other keys
// are allowed.
type Redaction struct {
	Scope    string   // "scope": ScopeThread or ScopeAll
	Keys     []string // "keys"
	Patterns []string // "patterns"
}

// MarshalCBOR encodes r as a canonical CBOR map.
func (r Redaction) MarshalCBOR() ([]byte, error) {
	return encMode.Marshal(map[string]any{keyScope: r.Scope, keyKeys: nonNilStrings(r.Keys), keyPatterns: nonNilStrings(r.Patterns)})
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// DecodeRedaction strictly decodes a redaction body. Bytes that are not a
// canonical CBOR map are an error wrapping [ErrCorrupt]; a key of the
// wrong type is a *FieldError naming it. It does not apply
// [Redaction.Validate].
func DecodeRedaction(body []byte) (*Redaction, error) {
	m, err := strictKeys(body, KindRedaction, keyScope, keyKeys, keyPatterns)
	if err != nil {
		return nil, fmt.Errorf("decode redaction: %w", err)
	}
	r := &Redaction{}
	if v, ok := m[keyScope]; ok {
		if r.Scope, err = textValue("body.scope", v); err != nil {
			return nil, fmt.Errorf("decode redaction: %w", err)
		}
	}
	for k, dst := range map[string]*[]string{keyKeys: &r.Keys, keyPatterns: &r.Patterns} {
		if v, ok := m[k]; ok {
			if *dst, err = stringList("body."+k, v); err != nil {
				return nil, fmt.Errorf("decode redaction: %w", err)
			}
		}
	}
	return r, nil
}

// Validate checks the redaction schema: "body.scope" (ScopeThread or
// ScopeAll), "body.keys[i]" (non-empty), "body.patterns[i]" (non-empty,
// valid path.Match syntax).
func (r *Redaction) Validate() error {
	if r.Scope != ScopeThread && r.Scope != ScopeAll {
		return fieldErrorf("body.scope", "must be %q or %q, got %s", ScopeThread, ScopeAll, quote(r.Scope))
	}
	for i, k := range r.Keys {
		if k == "" {
			return fieldErrorf(fmt.Sprintf("body.keys[%d]", i), "must not be empty")
		}
	}
	for i, p := range r.Patterns {
		if p == "" {
			return fieldErrorf(fmt.Sprintf("body.patterns[%d]", i), "must not be empty")
		}
		if _, err := path.Match(p, ""); err != nil {
			return fieldErrorf(fmt.Sprintf("body.patterns[%d]", i), "must be a path.Match pattern: %v, got %s", err, quote(p))
		}
	}
	return nil
}

// Covers reports whether r removes the value at path p whose key is key.
func (r *Redaction) Covers(key, p string) bool {
	key, p = strings.ToLower(key), strings.ToLower(p)
	for _, k := range r.Keys {
		k = strings.ToLower(k)
		if k == key && !strings.Contains(k, ".") || k == p {
			return true
		}
	}
	for _, pat := range r.Patterns {
		pat = strings.ToLower(pat)
		target := key
		if strings.Contains(pat, ".") {
			target = p
		}
		if ok, _ := path.Match(pat, target); ok {
			return true
		}
	}
	return false
}

// Redact removes from body (a canonical CBOR map) every value whose key
// covers says is covered, at any depth (through maps and arrays), and
// lists the paths removed, sorted, under [RedactedKey] (merged with a
// list already there). It returns body itself, and no paths, when
// nothing is covered. The key RedactedKey at the top is never removed.
// A RedactedKey that is not a list of text is a *FieldError.
func Redact(body []byte, covers func(key, path string) bool) ([]byte, []string, error) {
	m, err := decodeBodyMap(body)
	if err != nil {
		return nil, nil, fmt.Errorf("redact: %w", err)
	}
	var removed []string
	var walk func(v any, at string) any
	walk = func(v any, at string) any {
		switch v := v.(type) {
		case map[any]any:
			for k, e := range v {
				ks, ok := k.(string)
				if !ok {
					ks = fmt.Sprint(k)
				}
				p := ks
				if at != "" {
					p = at + "." + ks
				}
				if at == "" && ks == RedactedKey {
					continue
				}
				if covers(ks, p) {
					delete(v, k)
					removed = append(removed, p)
					continue
				}
				v[k] = walk(e, p)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
		return v
	}
	walk(m, "")
	if len(removed) == 0 {
		return body, nil, nil
	}
	if old, ok := m[RedactedKey]; ok {
		prior, err := stringList("body."+RedactedKey, old)
		if err != nil {
			return nil, nil, err
		}
		removed = append(removed, prior...)
	}
	slices.Sort(removed)
	removed = slices.Compact(removed)
	m[RedactedKey] = removed
	out, err := encMode.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("redact: encode: %w", err)
	}
	return out, removed, nil
}
