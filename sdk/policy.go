package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// policyKind is what the policies of one kind (retention, redaction) are
// read by: the kind of their records, its reserved thread, whether a
// thread's own policy replaces the policy of all threads (rules.PoliciesFor),
// and the decoder of a record's body.
type policyKind[P any] struct {
	name     string // "retention", "redaction": for messages
	kind     string
	reserved string
	override bool
	// decode reads the policy of a record, and the scope its body says.
	decode func(splog.Entry) (P, string, error)
}

// newest reads the newest policy record on home: the policy and its
// scope; ErrNotFound when home holds none. A newest record that does not
// verify or decode is not passed over for an older one, which might keep
// or redact less: it is an error, which says how to erase it.
func (k policyKind[P]) newest(ctx context.Context, l *splog.Log, home string) (P, string, error) {
	var zero P
	e, err := l.Latest(ctx, home, k.kind)
	if err != nil {
		return zero, "", fmt.Errorf("%s policy of %q: %w%s", k.name, home, err, eraseHint(err, home))
	}
	p, scope, err := k.decode(e)
	if err != nil {
		return zero, "", fmt.Errorf("%s policy of %q at clock %d: %w", k.name, home, e.Clock, err)
	}
	return p, scope, nil
}

// holds says whether the newest policy on home, of scope, is in force.
func (k policyKind[P]) holds(home, scope string) bool {
	return len(rules.PoliciesFor(k.reserved, home, []rules.PolicyRecord{{Thread: home, Scope: scope}}, k.override)) > 0
}

// For reads the policies that hold for thread (rules.PoliciesFor over
// the newest record of each of rules.PolicyHomes; the gets go out
// together), the policy of all threads' first. A home whose record could
// not be read fails the call only when a policy there would change what
// holds (a thread's own retention policy makes the policy of all threads
// moot).
func (k policyKind[P]) For(ctx context.Context, l *splog.Log, thread string) ([]P, error) {
	homes := rules.PolicyHomes(k.reserved, thread)
	pols := make([]P, len(homes))
	recs := make([]rules.PolicyRecord, len(homes))
	errs := make([]error, len(homes))
	var wg sync.WaitGroup
	for i, home := range homes {
		wg.Go(func() {
			var scope string
			pols[i], scope, errs[i] = k.newest(ctx, l, home)
			recs[i] = rules.PolicyRecord{Thread: home, Scope: scope}
		})
	}
	wg.Wait()
	var found []int // indexes of homes read
	var read []rules.PolicyRecord
	for i, err := range errs {
		if err == nil {
			found, read = append(found, i), append(read, recs[i])
		}
	}
	hold := rules.PoliciesFor(k.reserved, thread, read, k.override)
	for i, err := range errs {
		if err == nil || errors.Is(err, ErrNotFound) {
			continue
		}
		// Would a policy in force there change what holds?
		all := homes[i] == k.reserved
		_, scope, _ := rules.PolicyHome(k.reserved, map[bool]string{false: homes[i]}[all], all)
		maybe := append(slices.Clip(read), rules.PolicyRecord{Thread: homes[i], Scope: scope})
		if slices.Contains(rules.PoliciesFor(k.reserved, thread, maybe, k.override), len(read)) {
			return nil, err
		}
	}
	out := make([]P, 0, len(hold))
	for _, j := range hold {
		out = append(out, pols[found[j]])
	}
	return out, nil
}

// policyTTL bounds how long a client trusts what it last read of a
// policy when it has seen no policy record since: the bound for a
// record its connection missed (a reconnect drops what was in flight).
// Reading a thread's policies costs two gets per save or append, and a
// policy changes rarely. A save never erases on the strength of a cached
// retention policy without reading it afresh (enforceRetention), since a
// new policy may keep more.
const policyTTL = 2 * time.Second

// policyCache is what a client last read of the policies of both kinds
// (retention and redaction), by kind and thread. It is invalidated one
// way for all of them: a generation that every policy record seen on the
// connection (any thread, either kind), a reconnect and this client's
// own policy writes bump. An entry read under an older generation, or
// longer ago than policyTTL, is read again.
type policyCache struct {
	gen atomic.Uint64
	mu  sync.Mutex
	m   map[policyKey]policyEntry
}

// policyKey names what an entry holds: the policies of kind for thread,
// or with thread "" the threads that hold a policy of kind.
type policyKey struct{ kind, thread string }

type policyEntry struct {
	v   any
	err error // nil or ErrNotFound; other errors are not kept
	at  time.Time
	gen uint64
}

// maxPolicyEntries bounds the entries a client keeps; past it the cache
// starts again.
const maxPolicyEntries = 1 << 16

// watch subscribes to the subjects of every policy record, of both
// kinds, and empties the cache after a reconnect.
func (pc *policyCache) watch(nc *nats.Conn) {
	if nc == nil {
		return
	}
	for _, kind := range []string{records.KindRetention, records.KindRedaction} {
		_, _ = nc.Subscribe(splog.SubjectPrefix+".*."+kind, func(*nats.Msg) { pc.clear() }) // without it the TTL bounds staleness
	}
	nc.SetReconnectHandler(chainReconnect(nc, pc.clear))
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

// clear forgets every entry.
func (pc *policyCache) clear() {
	pc.gen.Add(1)
	pc.mu.Lock()
	pc.m = nil
	pc.mu.Unlock()
}

// cachedPolicy returns what k names, from pc while its entry is current
// (cached true), else from read, keeping what it found.
func cachedPolicy[V any](pc *policyCache, k policyKey, read func() (V, error)) (v V, cached bool, err error) {
	gen := pc.gen.Load()
	pc.mu.Lock()
	e, ok := pc.m[k]
	pc.mu.Unlock()
	if ok && e.gen == gen && time.Since(e.at) < policyTTL {
		return e.v.(V), true, e.err
	}
	v, err = refreshPolicy(pc, k, read)
	return v, false, err
}

// refreshPolicy reads what k names with read and keeps what it found (a
// value, or ErrNotFound), under the generation before the read: a policy
// record seen meanwhile makes the next use read again.
func refreshPolicy[V any](pc *policyCache, k policyKey, read func() (V, error)) (V, error) {
	gen, now := pc.gen.Load(), time.Now()
	v, err := read()
	if err == nil || errors.Is(err, ErrNotFound) {
		pc.mu.Lock()
		if pc.m == nil || len(pc.m) >= maxPolicyEntries {
			pc.m = make(map[policyKey]policyEntry)
		}
		pc.m[k] = policyEntry{v: v, err: err, at: now, gen: gen}
		pc.mu.Unlock()
	}
	return v, err
}
