package records

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of retention, whose bodies have schemas here. Both are written with
// act [ActKnow].
const (
	// KindRetention is a retention policy; its body is a [Retention].
	KindRetention = "core.retention"

	// KindPin pins a checkpoint so that retention keeps it; its body is a
	// [Pin].
	KindPin = "core.pin"
)

// Retention and pin body keys (wire format; never change).
const (
	keyScope     = "scope"
	keyKeepLast  = "keep_last"
	keyMaxAgeMS  = "max_age_ms"
	keyPinTarget = "target"
	keyPinReason = "reason"
)

// Scopes of a [Retention] policy.
const (
	// ScopeThread is a policy for the thread its record is on.
	ScopeThread = "thread"
	// ScopeAll is a policy for every thread that has no policy of its own;
	// its record is on [RetentionThread].
	ScopeAll = "all"
)

// RetentionThread is the reserved thread that holds the policy of all
// threads: the only thread where a [Retention] of scope [ScopeAll] may be
// written, and where one of scope [ScopeThread] may not.
const RetentionThread = "spl/retention"

// Retention is the body of a [KindRetention] record (act [ActKnow]): which
// checkpoints of a thread retention keeps. A checkpoint is kept when it is
// among the newest KeepLast of its thread, or younger than MaxAgeMS (when
// set), or named, or pinned; retention erases the others. It encodes as the
// map {"scope": text, "keep_last": uint, "max_age_ms": uint}, "max_age_ms"
// absent when zero. No other keys are allowed.
type Retention struct {
	Scope    string // "scope": ScopeThread or ScopeAll
	KeepLast uint64 // "keep_last": at least 1, or 0 with MaxAgeMS
	MaxAgeMS uint64 // "max_age_ms": milliseconds; absent when zero (no age limit)
}

// MarshalCBOR encodes r as a canonical CBOR map.
func (r Retention) MarshalCBOR() ([]byte, error) {
	m := map[string]any{keyScope: r.Scope, keyKeepLast: r.KeepLast}
	if r.MaxAgeMS != 0 {
		m[keyMaxAgeMS] = r.MaxAgeMS
	}
	return encMode.Marshal(m)
}

// UnmarshalCBOR decodes a retention body as [DecodeRetention] does.
func (r *Retention) UnmarshalCBOR(data []byte) error {
	d, err := DecodeRetention(data)
	if err != nil {
		return err
	}
	*r = *d
	return nil
}

// DecodeRetention strictly decodes a retention body. Bytes that are not a
// canonical CBOR map are an error wrapping [ErrCorrupt]; a key of the wrong
// type is a *FieldError naming it ("body.keep_last"), a key the schema
// does not have one on "body". DecodeRetention does not apply [Retention.Validate].
func DecodeRetention(body []byte) (*Retention, error) {
	m, err := strictKeys(body, KindRetention, keyScope, keyKeepLast, keyMaxAgeMS)
	if err != nil {
		return nil, fmt.Errorf("decode retention: %w", err)
	}
	r := &Retention{}
	if v, ok := m[keyScope]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("decode retention: %w",
				fieldErrorf("body.scope", "must be a text string, got %s", goCBORType(v)))
		}
		r.Scope = s
	}
	for _, f := range []struct {
		key string
		dst *uint64
	}{{keyKeepLast, &r.KeepLast}, {keyMaxAgeMS, &r.MaxAgeMS}} {
		v, ok := m[f.key]
		if !ok {
			continue
		}
		n, ok := v.(uint64)
		if !ok {
			return nil, fmt.Errorf("decode retention: %w",
				fieldErrorf("body."+f.key, "must be an unsigned integer, got %s", goCBORType(v)))
		}
		if f.key == keyMaxAgeMS && n == 0 {
			// Zero is written as an absent key; a present zero would be a
			// second encoding of the same policy.
			return nil, fmt.Errorf("decode retention: %w",
				fieldErrorf("body.max_age_ms", "must be positive; leave it out for no age limit"))
		}
		*f.dst = n
	}
	return r, nil
}

// Validate checks the retention schema and returns the first failure as a
// *FieldError: "body.scope" (ScopeThread or ScopeAll), "body.keep_last"
// (at least 1, or 0 with a MaxAgeMS: an expiry, which takes a thread's
// newest checkpoint too once it is old, unless its session can still be
// resumed; a policy that would keep nothing at all is refused).
func (r *Retention) Validate() error {
	if r.Scope != ScopeThread && r.Scope != ScopeAll {
		return fieldErrorf("body.scope", "must be %q or %q, got %s", ScopeThread, ScopeAll, quote(r.Scope))
	}
	if r.KeepLast < 1 && r.MaxAgeMS == 0 {
		return fieldErrorf("body.keep_last", "must be at least 1, or 0 with max_age_ms (an expiry), got %d", r.KeepLast)
	}
	return nil
}

// Pin is the body of a [KindPin] record (act [ActKnow]), on the thread of
// the checkpoint it pins: retention keeps the pinned checkpoint whatever
// the policy. It encodes as the map {"reason": text, "target": <binary
// CID>}, "reason" absent when empty. No other keys are allowed.
type Pin struct {
	Target ID     // "target": the pinned record
	Reason string // "reason": absent when empty, at most 1024 bytes
}

// MarshalCBOR encodes p as a canonical CBOR map.
func (p Pin) MarshalCBOR() ([]byte, error) {
	m := map[string]any{keyPinTarget: p.Target.Bytes()}
	if p.Reason != "" {
		m[keyPinReason] = p.Reason
	}
	return encMode.Marshal(m)
}

// UnmarshalCBOR decodes a pin body as [DecodePin] does.
func (p *Pin) UnmarshalCBOR(data []byte) error {
	d, err := DecodePin(data)
	if err != nil {
		return err
	}
	*p = *d
	return nil
}

// DecodePin strictly decodes a pin body. Bytes that are not a canonical
// CBOR map are an error wrapping [ErrCorrupt]; a key of the wrong type is
// a *FieldError naming it ("body.target"), a key the schema does not have
// one on "body". DecodePin does not apply [Pin.Validate].
func DecodePin(body []byte) (*Pin, error) {
	m, err := strictKeys(body, KindPin, keyPinTarget, keyPinReason)
	if err != nil {
		return nil, fmt.Errorf("decode pin: %w", err)
	}
	p := &Pin{}
	if v, ok := m[keyPinTarget]; ok {
		b, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("decode pin: %w",
				fieldErrorf("body.target", "must be a binary CID (byte string), got %s", goCBORType(v)))
		}
		id, err := IDFromBytes(b)
		if err != nil {
			return nil, fmt.Errorf("decode pin: %w", fieldErrorf("body.target", "must be a binary CID: %v", err))
		}
		p.Target = id
	}
	if v, ok := m[keyPinReason]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("decode pin: %w",
				fieldErrorf("body.reason", "must be a text string, got %s", goCBORType(v)))
		}
		if s == "" {
			return nil, fmt.Errorf("decode pin: %w",
				fieldErrorf("body.reason", "must not be empty; leave it out for no reason"))
		}
		p.Reason = s
	}
	return p, nil
}

// Validate checks the pin schema and returns the first failure as a
// *FieldError: "body.target" (present), "body.reason" (at most 1024
// bytes).
func (p *Pin) Validate() error {
	if p.Target.IsZero() {
		return fieldErrorf("body.target", "must name the pinned record")
	}
	if len(p.Reason) > maxReasonLen {
		return fieldErrorf("body.reason", "must be at most %d bytes, got %d", maxReasonLen, len(p.Reason))
	}
	return nil
}

// strictKeys decodes a body map whose keys must be text strings among
// allowed, for the schema of kind.
func strictKeys(body []byte, kind string, allowed ...string) (map[string]any, error) {
	m, err := decodeBodyMap(body)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(m))
	var unknown []string
	for k, v := range m {
		s, ok := k.(string)
		if !ok {
			return nil, fieldErrorf("body", "keys must be text strings, got a %s key", goCBORType(k))
		}
		if !slices.Contains(allowed, s) {
			unknown = append(unknown, s)
			continue
		}
		out[s] = v
	}
	if len(unknown) > 0 {
		slices.Sort(unknown) // the error does not depend on map order
		return nil, fieldErrorf("body", "unknown key %s: a %s body has only the keys %s",
			quote(unknown[0]), kind, strings.Join(allowed, ", "))
	}
	return out, nil
}
