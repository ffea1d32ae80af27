package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// RetentionThread is the reserved thread that holds the retention policy
// of all threads (scope "all"). A thread's own policy is on the thread.
const RetentionThread = records.RetentionThread

// ReasonRetention is the reason of the erasure records retention appends.
const ReasonRetention = "retention"

// ReasonRetentionCleared is the reason of the erasure records
// ClearRetention appends.
const ReasonRetentionCleared = "retention policy cleared"

// RetentionPolicy says which checkpoints (records of kind
// agent.session.checkpoint; retention touches no other kind) of a thread
// are kept: the newest KeepLast, those younger than MaxAge (when set),
// named ones and pinned ones. Retention erases every other checkpoint of
// the thread, with erasure records of reason "retention". KeepLast 0
// with a MaxAge is an expiry: once old, a thread's checkpoints all go,
// the newest too, once its session is completed (before that, the newest
// is its resume point); the rule is rules.RetentionDrops.
//
// A policy is stored as a core.retention record: a thread's policy on the
// thread itself, the policy of all threads (All) on RetentionThread. The
// newest policy record wins; a thread's own policy overrides the policy of
// all threads.
type RetentionPolicy struct {
	Thread   string        // the thread the policy is for; empty with All
	All      bool          // the policy of every thread without one of its own
	KeepLast int           // keep the newest KeepLast checkpoints; at least 1, or 0 with MaxAge (an expiry)
	MaxAge   time.Duration // also keep those younger than MaxAge; 0: no age limit

	// Where a stored policy is, and who set it when (Retention,
	// RetentionFor).
	ID    records.ID
	Clock uint64
	Actor string
	Time  time.Time
}

// Scope is "all" for the policy of all threads, else "thread".
func (p RetentionPolicy) Scope() string {
	if p.All {
		return records.ScopeAll
	}
	return records.ScopeThread
}

// Home checks which policy p names (Thread or All) and returns the thread
// its records are on: the thread itself, or RetentionThread for All
// (rules.PolicyHome).
func (p RetentionPolicy) Home() (string, error) {
	home, _, err := rules.PolicyHome(RetentionThread, p.Thread, p.All)
	return home, err
}

// body checks p and returns its record body and thread.
func (p RetentionPolicy) body() (*records.Retention, string, error) {
	thread, err := p.Home()
	if err != nil {
		return nil, "", err
	}
	if p.KeepLast < 0 {
		return nil, "", &records.FieldError{Field: "keep_last", Rule: fmt.Sprintf("must be at least 1, or 0 with max_age (an expiry), got %d", p.KeepLast)}
	}
	if p.MaxAge < 0 || (p.MaxAge > 0 && p.MaxAge < time.Millisecond) {
		return nil, "", &records.FieldError{Field: "max_age", Rule: fmt.Sprintf("must be 0 (no age limit) or at least 1ms, got %v", p.MaxAge)}
	}
	return &records.Retention{Scope: p.Scope(), KeepLast: uint64(p.KeepLast), MaxAgeMS: uint64(p.MaxAge.Milliseconds())}, thread, nil
}

// SetRetention stores policy p, as actor (empty: the client's actor). It
// erases nothing by itself: the policy is enforced whenever a checkpoint
// is saved to a thread it governs, and for every thread by ApplyRetention.
//
// The client that sets a policy enforces it from its next save on; other
// clients as soon as their connection has delivered the policy's record
// to them (the policy cache's subscription, as for redaction), or at the
// latest within policyTTL.
func (c *Client) SetRetention(ctx context.Context, actor string, p RetentionPolicy) (Receipt, error) {
	defer c.policies.clear()
	body, thread, err := p.body()
	if err != nil {
		return Receipt{}, err
	}
	r, err := c.Emit(ctx, Event{Act: records.ActKnow, Kind: records.KindRetention, Thread: thread, Actor: actor, Body: body})
	if err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// ClearRetention removes the policy p names (p.Thread's own, or with p.All
// the policy of all threads; the other fields of p are ignored), as actor
// (empty: the client's actor). It erases every core.retention record of
// that policy, by erasure records of reason ReasonRetentionCleared, so the
// audit trail keeps who set the policy and who cleared it. It erases no
// checkpoint.
//
// Once a thread's own policy is cleared, the policy of all threads
// governs the thread again, if there is one; with neither, every
// checkpoint of the thread is kept. Clearing a policy that is not set
// erases nothing and is no error. A policy record that does not verify
// fails the call with an error wrapping records.ErrCorrupt, and nothing is
// erased. A policy set while ClearRetention runs may survive it.
//
// It takes effect at once for this client and within policyTTL for the
// others (an erasure record is no policy record: their caches do not see
// it go).
func (c *Client) ClearRetention(ctx context.Context, actor string, p RetentionPolicy) (EraseResult, error) {
	defer c.policies.clear()
	thread, err := p.Home()
	if err != nil {
		return EraseResult{}, err
	}
	var ids []records.ID
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindRetention)) {
		if err != nil {
			return EraseResult{}, fmt.Errorf("spl/sdk: clear retention of %q: %w", thread, err)
		}
		ids = append(ids, e.ID)
	}
	if len(ids) == 0 {
		return EraseResult{}, nil
	}
	r, err := c.Erase(ctx, thread, actor, ids, ReasonRetentionCleared)
	if err != nil {
		return r, fmt.Errorf("spl/sdk: clear retention of %q: %w", thread, err)
	}
	return r, nil
}

// Retention lists the policies in force: the policy of all threads first,
// if there is one, then each thread's own, by thread.
func (c *Client) Retention(ctx context.Context) ([]RetentionPolicy, error) {
	homes, err := c.threadsWith(ctx, records.KindRetention)
	if err != nil {
		return nil, err
	}
	homes = append([]string{RetentionThread}, slices.DeleteFunc(homes, func(t string) bool { return t == RetentionThread })...)
	var out []RetentionPolicy
	for _, home := range homes {
		p, scope, err := retentionPolicies.newest(ctx, c.log, home)
		switch {
		case err == nil:
			if retentionPolicies.holds(home, scope) {
				out = append(out, p)
			}
		case !errors.Is(err, ErrNotFound):
			return out, err
		}
	}
	return out, nil
}

// RetentionFor returns the policy that governs thread: its own, else the
// policy of all threads (rules.PoliciesFor), else ErrNotFound. It costs
// two last-by-subject gets, sent together.
func (c *Client) RetentionFor(ctx context.Context, thread string) (RetentionPolicy, error) {
	pols, err := retentionPolicies.For(ctx, c.log, thread)
	if err != nil {
		return RetentionPolicy{}, err
	}
	if len(pols) == 0 {
		return RetentionPolicy{}, fmt.Errorf("no retention policy governs thread %q: %w", thread, ErrNotFound)
	}
	return pols[0], nil
}

// retentionPolicies reads the retention policies: a thread's own replaces
// the policy of all threads.
var retentionPolicies = policyKind[RetentionPolicy]{
	name: "retention", kind: records.KindRetention, reserved: RetentionThread, override: true,
	decode: func(e splog.Entry) (RetentionPolicy, string, error) {
		r, err := records.DecodeRetention(e.Record.Body)
		if err == nil {
			err = r.Validate()
		}
		if err != nil {
			return RetentionPolicy{}, "", err
		}
		p := RetentionPolicy{
			KeepLast: int(min(r.KeepLast, uint64(1<<31-1))),
			MaxAge:   time.Duration(min(r.MaxAgeMS, uint64(1<<63-1)/uint64(time.Millisecond))) * time.Millisecond,
			ID:       e.ID, Clock: e.Clock, Actor: e.Record.Header.Actor, Time: e.Record.Time(),
		}
		if r.Scope == records.ScopeAll {
			p.All = true
		} else {
			p.Thread = e.Record.Header.Thread
		}
		return p, r.Scope, nil
	},
}

// RetentionResult is what retention did to one thread.
type RetentionResult struct {
	Thread   string
	Policy   RetentionPolicy
	Kept     int          // checkpoints kept
	Erased   []records.ID // checkpoints erased now
	Erasures []Receipt    // the erasure records that erased them
	Corrupt  int          // checkpoints that did not verify: never erased by retention, not counted as kept

	// chained says the erasures were chained right after the clock
	// enforceRetention was given (its first plan held), each right after
	// the one before: the thread holds nothing else since.
	chained bool
}

// RetentionError reports that a checkpoint was saved but its thread's
// retention policy could not be enforced.
type RetentionError struct {
	Thread string
	Err    error
}

// Error implements error.
func (e *RetentionError) Error() string {
	return fmt.Sprintf("checkpoint saved; retention of thread %q not applied (the next save or apply retries): %v", e.Thread, e.Err)
}

// Unwrap returns the cause.
func (e *RetentionError) Unwrap() error { return e.Err }

// ApplyRetention enforces the retention policies on every thread that has
// checkpoints, as actor (empty: the client's actor), and returns what it
// did to each thread a policy governs. Applying again erases nothing more
// (until checkpoints age past a MaxAge).
func (c *Client) ApplyRetention(ctx context.Context, actor string) ([]RetentionResult, error) {
	actor, err := c.actorFor(actor)
	if err != nil {
		return nil, err
	}
	policies, err := c.threadsWith(ctx, records.KindRetention)
	if err != nil {
		return nil, err
	}
	if len(policies) == 0 {
		return nil, nil
	}
	threads, err := c.threadsWith(ctx, records.KindCheckpoint)
	if err != nil {
		return nil, err
	}
	// One thread whose policy or checkpoints cannot be read does not
	// stop retention on the others: its error (which names it) is joined
	// to the rest.
	var (
		out  []RetentionResult
		errs []error
	)
	for _, t := range threads {
		res, err := c.enforceRetention(ctx, t, actor, 0)
		if err != nil {
			errs = append(errs, err)
		}
		if res.Policy.KeepLast > 0 || res.Policy.MaxAge > 0 { // a policy governs it (an expiry keeps none by count)
			out = append(out, res)
		}
	}
	return out, errors.Join(errs...)
}

// enforceRetention erases the checkpoints of thread its policy does not
// keep. Without a policy it does nothing (a zero Policy in the result).
// at is the thread's last clock when the caller knows it (a save's), else
// 0: then it is read.
func (c *Client) enforceRetention(ctx context.Context, thread, actor string, at uint64) (RetentionResult, error) {
	key, read := retentionKey(thread), func() (RetentionPolicy, error) { return c.RetentionFor(ctx, thread) }
	p, cached, err := cachedPolicy(&c.policies, key, read)
	if errors.Is(err, ErrNotFound) {
		return RetentionResult{Thread: thread}, nil
	}
	if err != nil {
		return RetentionResult{Thread: thread}, err
	}
	var done RetentionResult // erased by earlier rounds
	for round := 1; ; round++ {
		res, err := c.retainOnce(ctx, thread, actor, p, cached, at)
		res.Erased = append(done.Erased, res.Erased...)
		res.Erasures = append(done.Erasures, res.Erasures...)
		res.chained = round == 1 && err == nil && at != 0
		if !errors.Is(err, splog.ErrMoved) || round == maxRetentionRounds {
			return res, err
		}
		// The thread moved between the plan and its erasure (a save, a
		// pin, a policy of the thread's own): plan again from what it
		// holds now, under the policy as it stands now.
		done = res
		at = 0 // read it again
		p, err = refreshPolicy(&c.policies, key, read)
		if errors.Is(err, ErrNotFound) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		cached = false
	}
}

// maxRetentionRounds bounds how often retention plans again because the
// thread moved before its erasure landed. Retention that gives up is
// retried by the next save or apply.
const maxRetentionRounds = 5

// retainOnce plans the retention of thread under policy p (read from the
// cache when cached) and erases what the plan drops, provided that nothing
// was appended to the thread after clock at (0: the clock is read first):
// otherwise it erases nothing more and returns an error wrapping
// log.ErrMoved.
func (c *Client) retainOnce(ctx context.Context, thread, actor string, p RetentionPolicy, cached bool, at uint64) (RetentionResult, error) {
	read := func() (RetentionPolicy, error) { return c.RetentionFor(ctx, thread) }
	// The clock the plan is valid at: everything the plan reads is at or
	// before it, or the erasure, conditional on it, is refused. A save
	// knows it already: its own record's.
	if at == 0 {
		var err error
		if at, err = c.log.ThreadClock(ctx, thread); err != nil {
			return RetentionResult{Thread: thread, Policy: p}, fmt.Errorf("retention of %q: %w", thread, err)
		}
	}
	now := time.Now()
	res, drop, err := c.plan(ctx, thread, p, now)
	if err == nil && len(drop) > 0 && cached {
		// Erasure cannot be undone, and a cached policy may be stale: a
		// newer policy of the thread, or a thread policy set since the
		// policy of all threads was read, may keep more. So before
		// erasing on the strength of the cache, read the policy afresh.
		// This costs the two gets the cache saves, but only on a save
		// that erases, which also reads every checkpoint of the thread
		// and appends an erasure record.
		p, err = refreshPolicy(&c.policies, retentionKey(thread), read)
		switch {
		case errors.Is(err, ErrNotFound):
			return RetentionResult{Thread: thread}, nil
		case err != nil:
			return RetentionResult{Thread: thread}, err
		case p.ID != res.Policy.ID:
			res, drop, err = c.plan(ctx, thread, p, now)
		}
	}
	if err != nil || len(drop) == 0 {
		return res, err
	}
	er, err := c.eraseAfter(ctx, thread, actor, drop, ReasonRetention, MaxErasureTargets, true, at)
	res.Erased, res.Erasures = er.Erased, er.Erasures
	if err != nil {
		return res, fmt.Errorf("retention of %q: %w", thread, err)
	}
	return res, nil
}

// plan returns the checkpoints of thread that policy p does not keep at
// now, and the result so far. It never drops what it cannot read: a
// checkpoint that does not verify or decode is left alone.
func (c *Client) plan(ctx context.Context, thread string, p RetentionPolicy, now time.Time) (RetentionResult, []records.ID, error) {
	return c.planDrop(ctx, thread, p, now, nil)
}

// planDrop is plan, with a further say for prune: a checkpoint the
// policy does not keep is dropped only if droppable (nil: all) says so.
func (c *Client) planDrop(ctx context.Context, thread string, p RetentionPolicy, now time.Time, droppable func(*records.Checkpoint) bool) (RetentionResult, []records.ID, error) {
	res := RetentionResult{Thread: thread, Policy: p}
	var cps []splog.Entry
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindCheckpoint)) {
		if errors.Is(err, records.ErrCorrupt) {
			res.Corrupt++
			continue
		}
		if err != nil {
			return res, nil, fmt.Errorf("retention of %q: read checkpoints: %w", thread, err)
		}
		cps = append(cps, e)
	}
	pinned, err := c.pinned(ctx, thread)
	if err != nil {
		return res, nil, fmt.Errorf("retention of %q: %w", thread, err)
	}
	in := make([]rules.RetentionCheckpoint, len(cps))
	for i, e := range cps {
		_, pin := pinned[e.ID]
		in[i] = rules.RetentionCheckpoint{ID: e.ID, Time: e.Record.Time(), Pinned: pin, Exempt: func() bool {
			cp, err := records.DecodeCheckpoint(e.Record.Body)
			return err != nil || cp.Name != "" || (droppable != nil && !droppable(cp))
		}}
	}
	// An expiry takes the newest too, once the session is over: its
	// status is read only when that decides.
	var serr error
	live := func() bool {
		st, err := c.statusNow(ctx, thread)
		serr = err
		return err != nil || st != StatusCompleted // unknown: kept
	}
	var drop []records.ID
	res.Kept, drop = rules.RetentionDrops(in, rules.Retention{KeepLast: p.KeepLast, MaxAge: p.MaxAge}, now, live)
	if serr != nil {
		return res, nil, fmt.Errorf("retention of %q: %w", thread, serr)
	}
	return res, drop, nil
}

// pinned returns the ids the core.pin records of thread pin, each with
// its first pin record.
func (c *Client) pinned(ctx context.Context, thread string) (map[records.ID]Receipt, error) {
	out := make(map[records.ID]Receipt)
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindPin)) {
		if errors.Is(err, records.ErrCorrupt) {
			continue // a pin that does not verify pins nothing
		}
		if err != nil {
			return nil, fmt.Errorf("read pins: %w", err)
		}
		if pin, err := records.DecodePin(e.Record.Body); err == nil {
			if _, ok := out[pin.Target]; !ok {
				out[pin.Target] = receipt(e)
			}
		}
	}
	return out, nil
}

// Pinned says what Pin did.
type Pinned struct {
	Receipt        // the core.pin record (the earlier one when Already)
	Thread  string // the thread of the checkpoint, where the pin is
	Already bool   // the checkpoint was already pinned; nothing was appended
}

// Pin pins the checkpoint id, as actor (empty: the client's actor), so
// that retention keeps it whatever the policy. thread narrows the search
// for id (empty: the whole log). It appends a core.pin record on the
// checkpoint's thread, unless one already pins it. A record that is not a
// checkpoint is refused (records.ErrInvalid); an unknown id is ErrNotFound.
// A pin does not stop an explicit Erase.
func (c *Client) Pin(ctx context.Context, thread, actor string, id records.ID, reason string) (Pinned, error) {
	actor, err := c.actorFor(actor)
	if err != nil {
		return Pinned{}, err
	}
	check := thread
	if check == "" {
		check = "x"
	}
	if _, err := records.New(records.ActKnow, records.KindPin, check, actor, time.Now(), &records.Pin{Target: id, Reason: reason}); err != nil {
		return Pinned{}, err
	}
	e, err := c.log.Get(ctx, id, thread)
	if err != nil {
		return Pinned{}, err
	}
	if k := e.Record.Header.Kind; k != records.KindCheckpoint {
		return Pinned{}, &records.FieldError{Field: "id",
			Rule: fmt.Sprintf("%s is a %s record; only checkpoints (%s) can be pinned", id, k, records.KindCheckpoint)}
	}
	thread = e.Record.Header.Thread
	pins, err := c.pinned(ctx, thread)
	if err != nil {
		return Pinned{}, err
	}
	if r, ok := pins[id]; ok {
		return Pinned{Receipt: r, Thread: thread, Already: true}, nil
	}
	r, err := c.Emit(ctx, Event{Act: records.ActKnow, Kind: records.KindPin, Thread: thread, Actor: actor,
		Body: &records.Pin{Target: id, Reason: reason}})
	if err != nil {
		return Pinned{}, err
	}
	return Pinned{Receipt: r, Thread: thread}, nil
}

// threadsWith lists, sorted, the threads that hold records of kind.
func (c *Client) threadsWith(ctx context.Context, kind string) ([]string, error) {
	if c.isClosing() {
		return nil, ErrClosed
	}
	return c.log.ThreadsWith(ctx, kind)
}

// retentionKey names the retention policy of thread in the client's
// policy cache.
func retentionKey(thread string) policyKey { return policyKey{records.KindRetention, thread} }
