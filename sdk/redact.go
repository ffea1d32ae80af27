package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// RedactionThread is the reserved thread that holds the redaction policy
// of all threads (All). A thread's own policy is on the thread.
const RedactionThread = records.RedactionThread

// RedactionPolicy says which keys of a record's body never reach the log:
// before a record is sealed, every value under a covered key is removed
// from its body, at any depth, and the body's "redacted" list names the
// paths removed. A key matches a map key by name (case-insensitive) or,
// when it holds a dot, a whole path ("shared_memory.api_key"); a pattern
// matches the same way with path.Match syntax ("*_token").
//
// A policy is stored as a core.redaction record: a thread's on the
// thread, the policy of all threads (All) on RedactionThread. The newest
// record of each wins, and both apply to a thread. A policy with no keys
// and no patterns lifts the one before it. Records of kinds core.* (the
// policies themselves, erasures, retention, pins) are not redacted.
type RedactionPolicy struct {
	Thread   string   // the thread the policy is for; empty with All
	All      bool     // the policy of every thread
	Keys     []string // keys (or dotted paths) to remove
	Patterns []string // path.Match patterns of keys (or paths) to remove

	// Where a stored policy is, and who set it when (RedactionFor).
	ID    records.ID
	Clock uint64
	Actor string
	Time  time.Time
}

// home returns the thread p's record goes on and its scope
// (rules.PolicyHome).
func (p RedactionPolicy) home() (string, string, error) {
	return rules.PolicyHome(RedactionThread, p.Thread, p.All)
}

// SetRedaction stores policy p, as actor (empty: the client's actor). It
// holds for every record sealed after it, by this client at once and by
// other clients as soon as their connection has delivered the policy's
// record to them (a subscription on the policies' subjects), or at the
// latest within policyTTL.
func (c *Client) SetRedaction(ctx context.Context, actor string, p RedactionPolicy) (Receipt, error) {
	defer c.policies.clear()
	thread, scope, err := p.home()
	if err != nil {
		return Receipt{}, err
	}
	body := &records.Redaction{Scope: scope, Keys: p.Keys, Patterns: p.Patterns}
	return c.Emit(ctx, Event{Act: records.ActKnow, Kind: records.KindRedaction, Thread: thread, Actor: actor, Body: body})
}

// RedactionFor returns the policies that hold for thread: the policy of
// all threads, then the thread's own, each when there is one
// (rules.PoliciesFor). A newest policy record that does not verify is
// not passed over for an older one, which might redact less: the thread
// takes no records until it is erased (the error says how).
func (c *Client) RedactionFor(ctx context.Context, thread string) ([]RedactionPolicy, error) {
	return redactionPolicies.For(ctx, c.log, thread)
}

// redactionPolicies reads the redaction policies: both the policy of all
// threads and a thread's own hold.
var redactionPolicies = policyKind[RedactionPolicy]{
	name: "redaction", kind: records.KindRedaction, reserved: RedactionThread,
	decode: func(e splog.Entry) (RedactionPolicy, string, error) {
		r, err := records.DecodeRedaction(e.Record.Body)
		if err == nil {
			err = r.Validate()
		}
		if err != nil {
			return RedactionPolicy{}, "", err
		}
		h := e.Record.Header
		p := RedactionPolicy{Thread: h.Thread, All: r.Scope == records.ScopeAll, Keys: r.Keys, Patterns: r.Patterns,
			ID: e.ID, Clock: e.Clock, Actor: h.Actor, Time: time.UnixMilli(h.TS).UTC()}
		if p.All {
			p.Thread = ""
		}
		return p, r.Scope, nil
	},
}

// eraseHint says how to remove the message that err, a read of a
// policy on thread, met not verifying: "" for any other error.
func eraseHint(err error, thread string) string {
	var ce *splog.CorruptError
	if !errors.As(err, &ce) {
		return ""
	}
	return fmt.Sprintf(" (the policy in force cannot be told; erase the message: spl erase --clock %d --thread %q, sdk.Client.EraseMessages)", ce.Clock, thread)
}

// redactBody applies the redaction policies of thread to body, a CBOR
// map: it returns the body without the covered values, with the paths
// removed listed under "redacted", and those paths; body itself and none
// when nothing is covered. Its callers are the seal path (seal.go) and
// a run's checkpoints (checkpointRecord), which seal what it returns.
func (c *Client) redactBody(ctx context.Context, thread string, body []byte) ([]byte, []string, error) {
	// The threads that hold a policy (RedactionThread for the policy of
	// all), read in one look at the stream's subjects: a thread none
	// covers costs no read of its own.
	homes, _, err := cachedPolicy(&c.policies, policyKey{kind: records.KindRedaction}, func() (map[string]bool, error) {
		ts, err := c.log.ThreadsWith(ctx, records.KindRedaction)
		m := make(map[string]bool, len(ts))
		for _, t := range ts {
			m[t] = true
		}
		return m, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("spl/sdk: redaction: %w", err)
	}
	if !slices.ContainsFunc(rules.PolicyHomes(RedactionThread, thread), func(h string) bool { return homes[h] }) {
		return body, nil, nil // no policy holds for thread: nothing to read
	}
	pols, _, err := cachedPolicy(&c.policies, policyKey{records.KindRedaction, thread}, func() ([]RedactionPolicy, error) { return c.RedactionFor(ctx, thread) })
	if err != nil {
		return nil, nil, fmt.Errorf("spl/sdk: redaction: %w", err)
	}
	if len(pols) == 0 {
		return body, nil, nil
	}
	rs := make([]records.Redaction, len(pols))
	for i, p := range pols {
		rs[i] = records.Redaction{Keys: p.Keys, Patterns: p.Patterns}
	}
	out, removed, err := records.Redact(body, func(key, path string) bool {
		for i := range rs {
			if rs[i].Covers(key, path) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, nil, fmt.Errorf("spl/sdk: redaction: %w", err)
	}
	return out, removed, nil
}

// redactOutput applies the redaction policies of thread to out, a tool's
// answer in JSON: an object is redacted as a body is (redactBody), and
// comes back as JSON without the covered values (and with the paths
// removed under "redacted"); an answer that is not an object has no keys
// for a policy to cover and is returned as it is. An object that cannot be
// kept exactly as a body (a duplicate key, a number out of range) is
// refused naming field "output".
func (c *Client) redactOutput(ctx context.Context, thread string, out []byte) ([]byte, error) {
	trimmed := bytes.TrimLeft(out, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return out, nil
	}
	body, err := records.BodyFromJSON(out)
	if err != nil {
		var fe *records.FieldError
		if errors.As(err, &fe) {
			return nil, &records.FieldError{Field: "output" + strings.TrimPrefix(fe.Field, "body"), Rule: fe.Rule}
		}
		return nil, fmt.Errorf("output: %w", err)
	}
	red, removed, err := c.redactBody(ctx, thread, body)
	if err != nil || len(removed) == 0 {
		return out, err
	}
	return records.BodyToJSON(red)
}
