package log

import (
	"errors"
	"fmt"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// Sentinel errors of the log. Corruption is not among them: a record that
// fails verification is reported with an error wrapping records.ErrCorrupt,
// the one corruption class of the project.
var (
	// ErrNotFound reports that no record matched a read.
	ErrNotFound = errors.New("spl/log: not found")
	// ErrClosed reports a call on a closed Log.
	ErrClosed = errors.New("spl/log: closed")
	// ErrConflict reports an append that lost the race for its thread on
	// every attempt: each time the writer re-read the thread's head and
	// sent it again, another writer had appended to the thread first.
	// Nothing was appended. The error wraps ErrExpectation too.
	ErrConflict = errors.New("spl/log: append conflict")
	// ErrMoved reports a conditional append (AppendAfter, Erase with
	// EraseAfter) not made: its thread is not at the clock it named. It
	// has moved past it (records were appended since), or it is behind it
	// (a clock the thread never reached, or an empty thread). Nothing was
	// appended; read the thread again and decide anew.
	ErrMoved = errors.New("spl/log: thread moved")
	// ErrDiskFull reports an append refused because the disk that holds
	// the log is full (or, with a server, its storage limit is reached):
	// nothing was appended. Free space and append again; reads still
	// work meanwhile.
	ErrDiskFull = natsio.ErrDiskFull
	// ErrForbidden reports an append the server dropped because the
	// connection's credentials may not write its subject (spl serve's
	// read token; the write token on any subject below the door):
	// nothing was appended. The error wraps ErrRefused too and names the
	// subject.
	ErrForbidden = natsio.ErrForbidden
	// ErrTooLarge reports a record larger than the log takes
	// (Options.MaxRecord): nothing was appended. The error is a
	// *records.FieldError on "body" too, naming the sizes.
	ErrTooLarge = errors.New("spl/log: record too large")
)

// CorruptError describes a stored message that failed verification. It
// wraps records.ErrCorrupt.
type CorruptError struct {
	Clock   uint64 // stream sequence of the message
	Subject string // subject it was stored under
	Reason  string // what did not verify
	Err     error  // underlying cause, if any
}

// Error implements error.
func (e *CorruptError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("spl/log: corrupt record at clock %d (%s): %s: %v", e.Clock, e.Subject, e.Reason, e.Err)
	}
	return fmt.Sprintf("spl/log: corrupt record at clock %d (%s): %s", e.Clock, e.Subject, e.Reason)
}

// Unwrap makes errors.Is(err, records.ErrCorrupt) true.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{records.ErrCorrupt, e.Err}
	}
	return []error{records.ErrCorrupt}
}
