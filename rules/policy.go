package rules

import (
	"fmt"

	"github.com/spl-dev/spl/records"
)

// The scope rule of policies (retention, redaction): a thread's own
// policy is stored on the thread (scope records.ScopeThread), the policy
// of all threads on the reserved thread of its kind
// (records.RetentionThread, records.RedactionThread; scope
// records.ScopeAll), and the newest record of each home is the policy
// there.

// PolicyHome returns the thread a policy's record goes on and the scope
// it says: thread's own on thread, or with all the policy of all threads
// on reserved, the reserved thread of its kind. Naming neither or both,
// or the reserved thread as a thread of its own, is a *records.FieldError
// on "thread".
func PolicyHome(reserved, thread string, all bool) (home, scope string, err error) {
	switch {
	case all && thread != "":
		return "", "", &records.FieldError{Field: "thread", Rule: "give a thread or All, not both"}
	case all:
		return reserved, records.ScopeAll, nil
	case thread == "":
		return "", "", &records.FieldError{Field: "thread", Rule: "give the thread of the policy, or All for every thread"}
	case thread == reserved:
		return "", "", &records.FieldError{Field: "thread", Rule: fmt.Sprintf("%q is reserved for the policy of all threads; use All", reserved)}
	}
	return thread, records.ScopeThread, nil
}

// PolicyHomes returns the threads whose newest policy record may hold
// for thread, the policy of all threads' first: reserved, then thread
// itself (the reserved thread has no policy of its own).
func PolicyHomes(reserved, thread string) []string {
	if thread == reserved {
		return []string{reserved}
	}
	return []string{reserved, thread}
}

// PolicyRecord is the newest policy record of a thread as PoliciesFor
// weighs it.
type PolicyRecord struct {
	Thread string // the thread it is on
	Scope  string // the scope its body says
}

// PoliciesFor returns the indexes of the records of recs (the newest
// policy record of each of PolicyHomes(reserved, thread) that has one)
// that hold for thread, the policy of all threads' first. A record holds
// with the scope of where it is: records.ScopeAll on reserved,
// records.ScopeThread on thread itself; one of the other scope (which
// validation refuses to write) holds nowhere.
// With override (retention: one policy governs a thread), a thread's own
// policy replaces the policy of all threads; without (redaction), both
// hold.
func PoliciesFor(reserved, thread string, recs []PolicyRecord, override bool) []int {
	all, own := -1, -1
	for i, r := range recs {
		switch {
		case r.Thread == reserved && r.Scope == records.ScopeAll:
			all = i
		case r.Thread == thread && thread != reserved && r.Scope == records.ScopeThread:
			own = i
		}
	}
	var out []int
	if all >= 0 && (own < 0 || !override) {
		out = append(out, all)
	}
	if own >= 0 {
		out = append(out, own)
	}
	return out
}
