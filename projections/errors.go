package projections

import (
	"errors"
	"fmt"
	"time"

	"github.com/spl-dev/spl/projections/fold"
)

// Sentinel errors of the package.
var (
	// ErrConflict reports a write that found its key, or the position, at
	// another revision than expected: another projector wrote meanwhile.
	// The runtime drops what it holds and starts again from the stored
	// position. It is fold.ErrConflict, which a Store's Commit wraps.
	ErrConflict = fold.ErrConflict
	// ErrBehind reports that a projection did not reach a clock in time.
	// It is wrapped by a *BehindError.
	ErrBehind = errors.New("spl/projections: projection behind")
	// ErrBusy reports that another process holds a projection's lease and
	// did not hand it over in time.
	ErrBusy = errors.New("spl/projections: projection held by another process")
	// ErrUnknown reports a projection name that the runtime does not run.
	ErrUnknown = errors.New("spl/projections: no such projection")
	// ErrReadOnly reports a change asked of a read-only runtime
	// (Options.ReadOnly): it applies nothing and empties nothing.
	ErrReadOnly = errors.New("spl/projections: read-only: the server runs this projection (a rebuild takes its admin token)")
	// ErrNoModels reports a read-only runtime whose read models do not
	// exist (yet): no server has run the projection on this log.
	ErrNoModels = errors.New("spl/projections: no read models")
)

// BehindError reports a wait for a projection that timed out or was
// cancelled. It wraps ErrBehind and the context's error.
type BehindError struct {
	Name   string        // the projection
	Clock  uint64        // the clock it had reached
	Want   uint64        // the clock waited for
	Holder string        // the process running it, "" when none
	Waited time.Duration // how long the wait lasted
	Err    error         // the context's error
}

// Error implements error.
func (e *BehindError) Error() string {
	who := "no projector is running"
	if e.Holder != "" {
		who = "projector " + e.Holder
	}
	return fmt.Sprintf("spl/projections: projection %s at clock %d, waited %s for clock %d (%s): %v",
		e.Name, e.Clock, e.Waited.Round(time.Millisecond), e.Want, who, e.Err)
}

// Unwrap returns ErrBehind and the context's error.
func (e *BehindError) Unwrap() []error { return []error{ErrBehind, e.Err} }
