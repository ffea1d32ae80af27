package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

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
	defer c.redactions.clear()
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
	homes, err := c.redactions.homes(func() (map[string]bool, error) {
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
	pols, err := c.redactions.get(thread, func() ([]RedactionPolicy, error) { return c.RedactionFor(ctx, thread) })
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

// redactionCache is what a client last read of each thread's redaction
// policies. A core.redaction record seen on the connection (any thread)
// empties it, so a policy another process stores holds here from the
// moment its record reaches this process; policyTTL bounds the staleness
// when that message was missed (a reconnect).
type redactionCache struct {
	mu sync.Mutex
	m  map[string]cachedRedaction
	// The threads that hold a policy (RedactionThread for the policy of
	// all), read in one look at the stream's subjects: a thread none
	// covers costs no read of its own.
	hs    map[string]bool
	hsAt  time.Time
	hsGen uint64
	gen   atomic.Uint64 // bumped by every policy seen
	sub   *nats.Subscription
}

type cachedRedaction struct {
	pols []RedactionPolicy
	at   time.Time
	gen  uint64
}

// watch subscribes to the subjects of every redaction policy record.
func (rc *redactionCache) watch(nc *nats.Conn) {
	if nc == nil {
		return
	}
	sub, err := nc.Subscribe(splog.SubjectPrefix+".*."+records.KindRedaction, func(*nats.Msg) { rc.clear() })
	if err == nil {
		rc.sub = sub
	}
	nc.SetReconnectHandler(chainReconnect(nc, rc.clear))
}

// chainReconnect returns a reconnect handler that calls fn, then the one
// nc had.
func chainReconnect(nc *nats.Conn, fn func()) nats.ConnHandler {
	prev := nc.Opts.ReconnectedCB
	return func(c *nats.Conn) {
		fn()
		if prev != nil {
			prev(c)
		}
	}
}

func (rc *redactionCache) get(thread string, read func() ([]RedactionPolicy, error)) ([]RedactionPolicy, error) {
	gen := rc.gen.Load()
	rc.mu.Lock()
	e, ok := rc.m[thread]
	rc.mu.Unlock()
	if ok && e.gen == gen && time.Since(e.at) < policyTTL {
		return e.pols, nil
	}
	now := time.Now()
	pols, err := read()
	if err != nil {
		return nil, err
	}
	rc.mu.Lock()
	if rc.m == nil || len(rc.m) > 1<<16 {
		rc.m = make(map[string]cachedRedaction)
	}
	rc.m[thread] = cachedRedaction{pols: pols, at: now, gen: gen}
	rc.mu.Unlock()
	return pols, nil
}

func (rc *redactionCache) clear() {
	rc.gen.Add(1)
	rc.mu.Lock()
	rc.m, rc.hs = nil, nil
	rc.mu.Unlock()
}

// homes returns the threads that hold a redaction policy, as read last
// (within policyTTL, and since no policy record was seen), else anew.
func (rc *redactionCache) homes(read func() (map[string]bool, error)) (map[string]bool, error) {
	gen := rc.gen.Load()
	rc.mu.Lock()
	hs, at, hsGen := rc.hs, rc.hsAt, rc.hsGen
	rc.mu.Unlock()
	if hs != nil && hsGen == gen && time.Since(at) < policyTTL {
		return hs, nil
	}
	now := time.Now()
	hs, err := read()
	if err != nil {
		return nil, err
	}
	rc.mu.Lock()
	rc.hs, rc.hsAt, rc.hsGen = hs, now, gen
	rc.mu.Unlock()
	return hs, nil
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
