package sdk

import (
	"errors"
	"testing"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// A completion or a pause that another process lands after a resume
// read the thread, and before its appends, is never slipped past: the
// appends are conditional on the thread as read, so they are refused
// (nothing appended), and ResumeSession, reading again, refuses the
// completed session or takes up the new pause. The steps of one round of
// ResumeSession are taken one by one here, with the other process's
// record between them.
func TestResumeRefusesWhatLandedMeanwhile(t *testing.T) {
	ctx, c, other := twoProcesses(t)

	resumedCount := func(thread string) int {
		n := 0
		for _, err := range c.log.Read(ctx, thread, splog.Kind(records.KindSessionResumed)) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	// readDecide takes the first two steps of a round: read, decide.
	readDecide := func(thread string) (resumeRead, *SessionCheckpoint) {
		t.Helper()
		rd, err := c.readResume(ctx, thread)
		if err != nil {
			t.Fatal(err)
		}
		from, err := c.decideResume(ctx, rd, ResumeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rd, from
	}

	t.Run("completion", func(t *testing.T) {
		const th = "th_done"
		if _, err := c.PauseSession(ctx, th, "", PauseOptions{}); err != nil {
			t.Fatal(err)
		}
		rd, from := readDecide(th) // paused: resumable
		if _, err := other.MarkSession(ctx, th, "", records.KindSessionCompleted, records.SessionEvent{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.appendResume(ctx, rd, "did:sync:agent:dev", from, map[string]any{"k": "v"})
		if !errors.Is(err, splog.ErrMoved) {
			t.Fatalf("append after a completion landed: %v, want ErrMoved", err)
		}
		if n := resumedCount(th); n != 0 {
			t.Fatalf("%d resumed events on a completed session, want 0", n)
		}
		if _, err := c.ResumeSession(ctx, th, "", ResumeOptions{}); !errors.Is(err, ErrSessionCompleted) {
			t.Fatalf("resume of the completed session: %v, want ErrSessionCompleted", err)
		}
		if st, err := c.statusNow(ctx, th); err != nil || st != StatusCompleted {
			t.Fatalf("status %q (%v), want completed", st, err)
		}
	})

	t.Run("pause", func(t *testing.T) {
		const th = "th_paused"
		first, err := c.PauseSession(ctx, th, "", PauseOptions{Reason: "first"})
		if err != nil {
			t.Fatal(err)
		}
		rd, from := readDecide(th)
		if from.ID != first.Checkpoint.ID {
			t.Fatalf("decided on %s, want the first pause's checkpoint %s", from.ID.Short(), first.Checkpoint.ID.Short())
		}
		second, err := other.PauseSession(ctx, th, "", PauseOptions{Reason: "second"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.appendResume(ctx, rd, "did:sync:agent:dev", from, nil); !errors.Is(err, splog.ErrMoved) {
			t.Fatalf("append after a pause landed: %v, want ErrMoved", err)
		}
		if n := resumedCount(th); n != 0 {
			t.Fatalf("%d resumed events, want 0", n)
		}
		rc, err := c.ResumeSession(ctx, th, "", ResumeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rc.From.ID != second.Checkpoint.ID {
			t.Fatalf("resumed from %s, want the second pause's checkpoint %s", rc.From.ID.Short(), second.Checkpoint.ID.Short())
		}
	})
}
