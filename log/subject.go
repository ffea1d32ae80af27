package log

import (
	"strings"

	"github.com/spl-dev/spl/records"
)

// SubjectPrefix is the first two tokens of every record subject.
const SubjectPrefix = "spl.rec"

// ThreadToken maps a thread to its subject token: the thread itself when it
// matches ^[A-Za-z0-9_-]{1,64}$, else "~" followed by the unpadded base64url
// of the thread's bytes. It is records.ThreadToken.
func ThreadToken(thread string) string { return records.ThreadToken(thread) }

// ThreadFromToken inverts ThreadToken. It is records.ThreadFromToken.
func ThreadFromToken(tok string) (string, bool) { return records.ThreadFromToken(tok) }

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
