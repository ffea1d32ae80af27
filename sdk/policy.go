package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	splog "github.com/spl-dev/spl/log"
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
