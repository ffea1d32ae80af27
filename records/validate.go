package records

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Validation limits.
const (
	maxKindLen   = 128
	maxKindParts = 16
	maxThreadLen = 256
	maxActorLen  = 256
	minTS        = 1
	maxTS        = 253402300799999 // 9999-12-31T23:59:59.999Z
	actPattern   = `^[A-Z][A-Z0-9_]{1,15}$`
	kindPattern  = `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`
	actorSyntax  = `did:<method>:<id> with method [a-z0-9]+ and id of [A-Za-z0-9._:%-]`
)

var (
	actRE  = regexp.MustCompile(actPattern)  // the rule; validAct is its fast form
	kindRE = regexp.MustCompile(kindPattern) // the rule; validKind is its fast form
)

// requiredAct maps a well-known kind to the act it must be written with.
var requiredAct = map[string]string{
	KindCheckpoint: ActLearn,
	KindErasure:    ActForget,
	KindRetention:  ActKnow,
	KindPin:        ActKnow,
	KindRedaction:  ActKnow,
	KindActorKey:   ActKnow,
}

// Validate checks every rule of the format and returns the first failure as
// a *FieldError, in this order: the header fields "v", "act", "kind",
// "thread", "actor", "ts"; the act a well-known kind requires (Field "act");
// the encoded size (Field "body"); the body, which must be a canonical CBOR
// map and match the schema of a well-known kind ([ValidateBody]); then the
// rules that tie a well-known body to its record's thread:
//
//   - an erasure never names an erasure record ("body.targets[i]"):
//     erasures stay as the audit trail;
//   - a retention policy of scope [ScopeAll] is on [RetentionThread], and
//     one of scope [ScopeThread] is not ("body.scope");
//   - a checkpoint body's "thread" and "actor", when given, equal the
//     header's ("body.thread", "body.actor").
//   - an actor key binding is on [ActorThread] ("thread").
//
// Validate is the rule for writing; reading checks the body digest and the
// id instead ([Record.Verify]), so a record stored under older rules stays
// readable.
func (r *Record) Validate() error {
	if r.checked != nil && r.checked.unchanged(r) {
		return nil
	}
	if err := r.Header.validate(); err != nil {
		return err
	}
	if n := r.encodedSize(); n > MaxRecordSize {
		return sizeError(n)
	}
	body, err := validBody(r.Header.Kind, r.Body)
	if err != nil {
		return err
	}
	if cp, ok := body.(*Checkpoint); ok {
		if err := cp.checkHeader(r.Header); err != nil {
			return err
		}
	}
	return onThread(r.Header.Thread, body)
}

// onThread checks the rules that tie a well-known body, as validBody
// returned it, to the thread of its record.
func onThread(thread string, body any) error {
	switch b := body.(type) {
	case *Erasure:
		for i, t := range b.Targets {
			if t.Header.Kind == KindErasure {
				return fieldErrorf(fmt.Sprintf("body.targets[%d]", i), "must not be an erasure record (erasures stay as the audit trail), got %s", t.ID)
			}
		}
	case *Redaction:
		switch {
		case b.Scope == ScopeAll && thread != RedactionThread:
			return fieldErrorf("body.scope", "%q is the policy of all threads and belongs on thread %s, got thread %s", ScopeAll, RedactionThread, quote(thread))
		case b.Scope == ScopeThread && thread == RedactionThread:
			return fieldErrorf("body.scope", "must be %q on thread %s (the policy of all threads), got %q", ScopeAll, RedactionThread, ScopeThread)
		}
	case *ActorKey:
		if thread != ActorThread {
			return fieldErrorf("thread", "a %s binding belongs on thread %s, got %s", KindActorKey, ActorThread, quote(thread))
		}
	case *Retention:
		switch {
		case b.Scope == ScopeAll && thread != RetentionThread:
			return fieldErrorf("body.scope", "%q is the policy of all threads and belongs on thread %s, got thread %s", ScopeAll, RetentionThread, quote(thread))
		case b.Scope == ScopeThread && thread == RetentionThread:
			return fieldErrorf("body.scope", "must be %q on thread %s (the policy of all threads), got %q", ScopeAll, RetentionThread, ScopeThread)
		}
	}
	return nil
}

// validate checks the header's field rules (all but "bd" and "prev", which
// any value satisfies) and returns the first failure.
func (h Header) validate() *FieldError {
	if h.V != FormatVersion {
		return fieldErrorf("v", "must be %d, got %d", FormatVersion, h.V)
	}
	if rule := actRule(h.Act); rule != "" {
		return &FieldError{Field: "act", Rule: rule}
	}
	if rule := kindRule(h.Kind); rule != "" {
		return &FieldError{Field: "kind", Rule: rule}
	}
	if rule := threadRule(h.Thread); rule != "" {
		return &FieldError{Field: "thread", Rule: rule}
	}
	if rule := actorRule(h.Actor); rule != "" {
		return &FieldError{Field: "actor", Rule: rule}
	}
	if h.TS < minTS || h.TS > maxTS {
		return fieldErrorf("ts", "must be Unix milliseconds from %d to %d (year 9999), got %d", minTS, maxTS, h.TS)
	}
	if want, ok := requiredAct[h.Kind]; ok && h.Act != want {
		return fieldErrorf("act", "kind %s requires act %s, got %s", h.Kind, want, quote(h.Act))
	}
	return nil
}

// CheckKind reports whether kind follows the rule of the header field
// "kind" (a lower-case dotted name, at most 128 bytes and 16 parts): nil,
// or a *FieldError with Field "kind". Filters that take a kind use it, so
// that "*" or ">" never reach a subject filter and a kind no record can
// have is an error rather than an empty answer.
func CheckKind(kind string) error {
	if rule := kindRule(kind); rule != "" {
		return &FieldError{Field: "kind", Rule: rule}
	}
	return nil
}

// CheckAct reports whether act follows the rule of the header field "act"
// (an upper-case verb): nil, or a *FieldError with Field "act".
func CheckAct(act string) error {
	if rule := actRule(act); rule != "" {
		return &FieldError{Field: "act", Rule: rule}
	}
	return nil
}

func actRule(act string) string {
	if !validAct(act) {
		return "must match " + actPattern + " (upper-case verb), got " + quote(act)
	}
	return ""
}

// CheckThread reports whether thread follows the rule of the header field
// "thread" (1-256 bytes of UTF-8, no control characters): nil, or a
// *FieldError with Field "thread".
func CheckThread(thread string) error {
	if rule := threadRule(thread); rule != "" {
		return &FieldError{Field: "thread", Rule: rule}
	}
	return nil
}

func kindRule(kind string) string {
	switch {
	case len(kind) > maxKindLen:
		return "must be at most 128 bytes, got " + strconv.Itoa(len(kind)) + ": " + quote(kind)
	case !validKind(kind):
		return "must match " + kindPattern + " (lower-case dotted name), got " + quote(kind)
	case strings.Count(kind, ".")+1 > maxKindParts:
		return "must have at most 16 dot-separated parts, got " + strconv.Itoa(strings.Count(kind, ".")+1)
	}
	return ""
}

func threadRule(thread string) string {
	if len(thread) < 1 || len(thread) > maxThreadLen {
		return "must be 1-256 bytes of UTF-8, got " + strconv.Itoa(len(thread)) + " bytes"
	}
	if !utf8.ValidString(thread) {
		return "must be valid UTF-8, got " + quote(thread)
	}
	for i, c := range thread {
		if unicode.IsControl(c) {
			return fmt.Sprintf("must not contain control characters, got %U at byte %d", c, i)
		}
	}
	return ""
}

func actorRule(actor string) string {
	if len(actor) > maxActorLen {
		return "must be at most 256 bytes, got " + strconv.Itoa(len(actor))
	}
	if !validDID(actor) {
		return "must be a DID, " + actorSyntax + ", got " + quote(actor)
	}
	return ""
}

// validDID reports whether actor is did:<method>:<id> with the characters
// actorSyntax allows.
func validDID(actor string) bool {
	rest, ok := strings.CutPrefix(actor, "did:")
	if !ok {
		return false
	}
	method, id, ok := strings.Cut(rest, ":")
	if !ok || method == "" || id == "" {
		return false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '%' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateBody checks a body's bytes: it must be a canonical CBOR map in the
// strict profile and, for a well-known kind, match its schema
// ([Checkpoint.Validate], [Erasure.Validate], [Retention.Validate],
// [Pin.Validate]). Other kinds need only be a map. Failures are
// *FieldError values with Field "body" or a path into the body.
func ValidateBody(kind string, body []byte) error {
	_, err := validBody(kind, body)
	return err
}

// validBody is ValidateBody that also returns the decoded body of a
// well-known kind (nil for other kinds).
func validBody(kind string, body []byte) (any, error) {
	var v interface{ Validate() error }
	var err error
	switch kind {
	case KindCheckpoint:
		v, err = DecodeCheckpoint(body)
	case KindErasure:
		v, err = DecodeErasure(body)
	case KindRetention:
		v, err = DecodeRetention(body)
	case KindPin:
		v, err = DecodePin(body)
	case KindRedaction:
		v, err = DecodeRedaction(body)
	case KindActorKey:
		v, err = DecodeActorKey(body)
	case KindSessionPaused, KindSessionResumed, KindSessionFailed, KindSessionCompleted, KindSessionCancelled, KindSessionMemory:
		v, err = DecodeSessionEvent(kind, body)
	default:
		if err := checkBodyMap(body); err != nil {
			return nil, asFieldError(err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, asFieldError(err)
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if cp, ok := v.(*Checkpoint); ok {
		// The execution state (type, memory, pause) beside the summary.
		if _, err := ExecStateOf(cp); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// asFieldError returns err's *FieldError, or a *FieldError on "body" that
// carries err's text (a strict decoding failure).
func asFieldError(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	msg := strings.TrimSuffix(err.Error(), ": "+ErrCorrupt.Error())
	return &FieldError{Field: "body", Rule: "must be a canonical CBOR map: " + msg}
}

// validAct reports whether s matches actPattern, without a regexp (it runs
// for every record built or read).
func validAct(s string) bool {
	if len(s) < 2 || len(s) > 16 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validKind reports whether s matches kindPattern, without a regexp:
// dot-separated words, each a lower-case letter then lower-case letters,
// digits and underscores.
func validKind(s string) bool {
	start := true // at the first byte of a word
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case start:
			if c < 'a' || c > 'z' {
				return false
			}
			start = false
		case c == '.':
			start = true
		case !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'):
			return false
		}
	}
	return len(s) > 0 && !start
}
