package rules

import (
	"time"

	"github.com/spl-dev/spl/records"
)

// RetentionCheckpoint is one checkpoint of a thread as retention weighs
// it.
type RetentionCheckpoint struct {
	ID     records.ID
	Time   time.Time // the checkpoint's time
	Pinned bool      // a core.pin record of the thread pins it
	// Exempt, when set, says whether something else keeps a checkpoint
	// that neither the count, the age nor a pin keeps: a name, a body that
	// does not decode (what cannot be read is never dropped), the caller's
	// own rule (prune's --keep-clean-only). It is asked of those alone, so
	// that the bodies of the checkpoints kept anyway are not decoded.
	Exempt func() bool
}

// Retention is a retention policy as RetentionDrops applies it.
type Retention struct {
	KeepLast int           // the newest KeepLast checkpoints are kept; 0: none by count (an expiry, with MaxAge)
	MaxAge   time.Duration // checkpoints younger than this are kept; 0: no age limit
}

// RetentionDrops returns which of cps, a thread's checkpoints oldest
// first, policy r drops at now, and how many it keeps. A checkpoint is
// kept when it is among the newest r.KeepLast, younger than r.MaxAge,
// pinned, or exempt (RetentionCheckpoint.Exempt). With r.KeepLast 0 (an
// expiry: a whole thread's checkpoints may go once they are old), the
// newest is kept anyway while the thread's session is live (any status
// but completed): an expiry never takes the resume point of a session
// that is not over. live says whether it is; it is asked only when the
// newest would go otherwise (nil: live), so that a plan that keeps the
// newest anyway reads no status.
func RetentionDrops(cps []RetentionCheckpoint, r Retention, now time.Time, live func() bool) (kept int, drop []records.ID) {
	for i, cp := range cps {
		newest := i == len(cps)-1
		keep := i >= len(cps)-r.KeepLast || cp.Pinned || (r.MaxAge > 0 && now.Sub(cp.Time) < r.MaxAge) ||
			cp.Exempt != nil && cp.Exempt() ||
			newest && r.KeepLast == 0 && (live == nil || live())
		if keep {
			kept++
		} else {
			drop = append(drop, cp.ID)
		}
	}
	return kept, drop
}
