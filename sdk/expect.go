package sdk

import (
	"context"
	"errors"
	"fmt"

	splog "github.com/spl-dev/spl/log"
)

// Conditional appends: an append that lands only while its thread is
// where the writer last saw it, as event stores offer (expected version).
// The condition is the clock of the thread's newest record (0: a thread
// with no record yet); a writer that read the thread at that clock and
// decided what to write from it appends with AppendEventIf, and learns,
// when another writer got there first, where the thread is now.

// ErrThreadMoved is wrapped by every *ThreadMovedError.
var ErrThreadMoved = errors.New("spl/sdk: the thread is not at the expected clock")

// ThreadMovedError reports a conditional append refused because its
// thread had moved on: nothing was appended.
type ThreadMovedError struct {
	Thread   string
	Expected uint64 // the clock the writer expected the thread at
	Current  uint64 // the clock of the thread's newest record now (0: none)
}

// Error says where the thread was expected and where it is.
func (e *ThreadMovedError) Error() string {
	return fmt.Sprintf("spl/sdk: thread %q is at clock %d, not %d: nothing appended", e.Thread, e.Current, e.Expected)
}

// Unwrap makes it an ErrThreadMoved, and a conflict (ErrConflict).
func (e *ThreadMovedError) Unwrap() []error { return []error{ErrThreadMoved, ErrConflict} }

// AppendEventIf appends ev on condition that its thread's newest record is
// at clock expected (0: the thread has no record). Otherwise nothing is
// appended and the error is a *ThreadMovedError naming the thread's
// clock now.
func (c *Client) AppendEventIf(ctx context.Context, ev Event, expected uint64) (Record, error) {
	r, err := c.appendEventAfter(ctx, ev, expected)
	if err == nil || !errors.Is(err, splog.ErrMoved) {
		return r, err
	}
	cur, cerr := c.log.ThreadClock(ctx, ev.Thread)
	if cerr != nil {
		return Record{}, fmt.Errorf("append to %q at clock %d: %w (and reading where it is: %v)", ev.Thread, expected, ErrThreadMoved, cerr)
	}
	return Record{}, &ThreadMovedError{Thread: ev.Thread, Expected: expected, Current: cur}
}
