package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// ReasonPrune begins the reason of the erasure records Prune appends.
const ReasonPrune = "prune"

// PruneOptions says which checkpoints of a thread Prune erases: those
// older than OlderThan and outside the newest KeepLast, by the rule of a
// retention policy {KeepLast, MaxAge: OlderThan} (sdk/retention.go): the
// newest checkpoint, named ones and pinned ones are always kept.
type PruneOptions struct {
	OlderThan time.Duration // erase checkpoints older than this (0: whatever their age)
	KeepLast  int           // keep the newest KeepLast (0: only the newest one, with OlderThan)
	// KeepCleanOnly erases, of the checkpoints the two above select,
	// only those whose body says "is_clean": false (looked up as
	// FactsOf does): checkpoints saved in the middle of a step, with
	// state not to resume from. The clean ones (true, or no is_clean)
	// are kept.
	KeepCleanOnly bool
	DryRun        bool      // plan only: Pruned lists what would be erased, nothing is written
	Now           time.Time // the time ages are measured at (zero: now)
	Actor         string    // of the erasure records; empty: the client's actor
}

// policy checks o and returns the retention policy it prunes by.
func (o PruneOptions) policy(thread string) (RetentionPolicy, error) {
	switch {
	case o.OlderThan < 0:
		return RetentionPolicy{}, &records.FieldError{Field: "older_than", Rule: fmt.Sprintf("must be positive, got %v", o.OlderThan)}
	case o.KeepLast < 0:
		return RetentionPolicy{}, &records.FieldError{Field: "keep_last", Rule: fmt.Sprintf("must be at least 1, got %d", o.KeepLast)}
	case o.OlderThan == 0 && o.KeepLast == 0:
		return RetentionPolicy{}, &records.FieldError{Field: "older_than", Rule: "give older_than, keep_last or both"}
	case o.OlderThan > 0 && o.OlderThan < time.Millisecond:
		return RetentionPolicy{}, &records.FieldError{Field: "older_than", Rule: fmt.Sprintf("must be at least 1ms, got %v", o.OlderThan)}
	}
	return RetentionPolicy{Thread: thread, KeepLast: max(o.KeepLast, 1), MaxAge: o.OlderThan}, nil
}

// reason is the reason of the erasure records of o.
func (o PruneOptions) reason() string {
	var parts []string
	if o.OlderThan > 0 {
		parts = append(parts, "older than "+o.OlderThan.String())
	}
	if o.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("keep last %d", o.KeepLast))
	}
	if o.KeepCleanOnly {
		parts = append(parts, "is_clean false only")
	}
	return ReasonPrune + ": " + strings.Join(parts, ", ")
}

// PruneResult says what Prune did, or with DryRun would do.
type PruneResult struct {
	Thread   string
	DryRun   bool
	Kept     int          // checkpoints kept
	Pruned   []records.ID // checkpoints erased (with DryRun: that would be)
	Erasures []Receipt    // the erasure records
	Corrupt  int          // checkpoints that did not verify: never erased, not counted as kept
}

// Prune erases the checkpoints of thread that o selects, through the
// erasure path of Erase and retention (conditional erasure records of
// reason "prune: …", secure deletes), so a prune is audited like any
// erasure. It plans again, up to five times, when the thread moves
// between the plan and the erasure (a save, a pin).
//
// The standing form of OlderThan is a retention policy: spl retention
// set --keep-last 1 --max-age D keeps what Prune with OlderThan D keeps,
// at every save.
func (c *Client) Prune(ctx context.Context, thread string, o PruneOptions) (PruneResult, error) {
	p, err := o.policy(thread)
	if err != nil {
		return PruneResult{}, err
	}
	actor, err := c.actorFor(o.Actor)
	if err != nil && !o.DryRun { // a dry run writes nothing
		return PruneResult{}, err
	}
	if !o.DryRun {
		if err := checkErasure(thread, actor, o.reason()); err != nil {
			return PruneResult{}, err
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var droppable func(*records.Checkpoint) bool
	if o.KeepCleanOnly {
		droppable = func(cp *records.Checkpoint) bool {
			f := FactsOf(cp)
			return f.Clean != nil && !*f.Clean
		}
	}
	out := PruneResult{Thread: thread, DryRun: o.DryRun}
	for round := 1; ; round++ {
		at, err := c.log.ThreadClock(ctx, thread)
		if err != nil {
			return out, fmt.Errorf("prune %q: %w", thread, err)
		}
		res, drop, err := c.planDrop(ctx, thread, p, now, droppable)
		if err != nil {
			return out, fmt.Errorf("prune %q: %w", thread, err)
		}
		out.Kept, out.Corrupt = res.Kept, res.Corrupt
		if o.DryRun || len(drop) == 0 {
			if o.DryRun {
				out.Pruned = drop
			}
			return out, nil
		}
		er, err := c.eraseAfter(ctx, thread, actor, drop, o.reason(), MaxErasureTargets, true, at)
		out.Pruned = append(out.Pruned, er.Erased...)
		out.Erasures = append(out.Erasures, er.Erasures...)
		if errors.Is(err, splog.ErrMoved) && round < maxRetentionRounds {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("prune %q: %w", thread, err)
		}
		return out, nil
	}
}
