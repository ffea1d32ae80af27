package log

import (
	"encoding/base64"
	"strings"

	"github.com/spl-dev/spl/records"
)

// SubjectPrefix is the first two tokens of every record subject.
const SubjectPrefix = "spl.rec"

// ThreadToken maps a thread to its subject token: the thread itself when it
// matches ^[A-Za-z0-9_-]{1,64}$, else "~" followed by the unpadded base64url
// of the thread's bytes.
func ThreadToken(thread string) string {
	if plainToken(thread) {
		return thread
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(thread))
}

func plainToken(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ThreadFromToken inverts ThreadToken.
func ThreadFromToken(tok string) (string, bool) {
	if rest, ok := strings.CutPrefix(tok, "~"); ok {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return tok, plainToken(tok)
}

// RecordSubject is the subject a record of kind on thread is stored under:
// spl.rec.<thread-token>.<kind>, the kind's dots becoming subject tokens.
func RecordSubject(thread, kind string) string {
	return SubjectPrefix + "." + ThreadToken(thread) + "." + kind
}

// ThreadSubject is the wildcard subject of every record of thread.
func ThreadSubject(thread string) string {
	return SubjectPrefix + "." + ThreadToken(thread) + ".>"
}

// subjectToken returns the thread token of a record subject,
// spl.rec.<token>.<kind…>.
func subjectToken(subject string) string {
	rest := strings.TrimPrefix(subject, SubjectPrefix+".")
	tok, _, _ := strings.Cut(rest, ".")
	return tok
}

// subjectKind returns the kind of a record subject: its tokens after the
// thread token, joined by dots ("" for a subject that is no record
// subject). A thread token holds no dot, so a dotted kind that merely ends
// like another (app.core.erasure) is told apart from it.
func subjectKind(subject string) string {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		return ""
	}
	_, kind, _ := strings.Cut(rest, ".")
	return kind
}

// isErasureSubject reports whether subject is that of a core.erasure
// record, whatever its thread.
func isErasureSubject(subject string) bool {
	return subjectKind(subject) == records.KindErasure
}
