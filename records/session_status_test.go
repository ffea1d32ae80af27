package records

import "testing"

// The one rule of a session's status: its newest status event, else
// running once it has work, else no session.
func TestSessionStatus(t *testing.T) {
	for _, tc := range []struct {
		last    string
		hasWork bool
		want    string
	}{
		{"", false, ""},
		{"", true, StatusRunning},
		{KindSessionPaused, true, StatusPaused},
		{KindSessionPaused, false, StatusPaused}, // an event makes a session
		{KindSessionResumed, true, StatusRunning},
		{KindSessionFailed, true, StatusFailed},
		{KindSessionCompleted, true, StatusCompleted},
		{KindSessionCancelled, false, StatusCancelled},
		{KindCheckpoint, true, StatusRunning}, // not a status event
	} {
		if got := SessionStatus(tc.last, tc.hasWork); got != tc.want {
			t.Errorf("SessionStatus(%q, %v) = %q, want %q", tc.last, tc.hasWork, got, tc.want)
		}
	}
}
