package records

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every validation failure: a record, body or id
// that is well formed but breaks a rule of the format. Every [*FieldError]
// unwraps to it.
var ErrInvalid = errors.New("spl/records: invalid record")

// ErrCorrupt is wrapped by every integrity failure: bytes that are not a
// strict, canonical encoding, a body digest that does not match its body, or
// an id that does not match its header. It is the one corruption class of
// the whole project; the log reports damaged messages with it too.
var ErrCorrupt = errors.New("spl/records: corrupt record")

// FieldError is a validation failure that names the field and the rule it
// breaks. Field is a header field ("act", "thread", …), "body", or a path
// into the body of a well-known kind ("body.summary", "body.learnings[2]").
// Rule says what is required and, where it helps, the offending value
// (truncated).
//
// Every FieldError unwraps to [ErrInvalid].
type FieldError struct {
	Field string
	Rule  string
}

// Error returns "spl/records: <field>: <rule>".
func (e *FieldError) Error() string {
	return "spl/records: " + e.Field + ": " + e.Rule
}

// Unwrap returns [ErrInvalid].
func (e *FieldError) Unwrap() error { return ErrInvalid }

// fieldErrorf builds a *FieldError with a formatted rule.
func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// corruptf returns an error wrapping ErrCorrupt, with a formatted message.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}

// corruptErr wraps err (a decoder error) and ErrCorrupt under msg.
func corruptErr(msg string, err error) error {
	return fmt.Errorf("%s: %w: %w", msg, err, ErrCorrupt)
}

// maxQuoted is how many bytes of an offending value a rule quotes.
const maxQuoted = 64

// quote returns s quoted with %q, truncated to maxQuoted bytes (on a rune
// boundary) with "..." appended when it was longer.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%q...", s[:n])
}
