package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spl-dev/spl/records"
)

// An erasure stopped at any of its steps, by a crash of the process that
// runs it and of the server it runs, leaves no byte of an erased body on
// disk once the log has been opened again.
//
// A stop in the middle of the deletes is the server's crash: nats-server
// secure-deletes a message by first writing a delete tombstone, then
// rewriting the message's block with the message overwritten. Killed
// between the two, it comes back with the message deleted and its bytes
// intact, and never erases it again. The test makes that state with a
// plain delete (the tombstone alone) of the target being deleted, then
// stops the erasure and closes the log, which stops the server.
func TestEraseStoppedAtEveryStep(t *testing.T) {
	const n = 4
	crash := errors.New("injected crash")
	for k := 1; ; k++ {
		dir := t.TempDir()
		l := openTest(t, dir)
		marker := func(i int) string { return fmt.Sprintf("SPL-STOP-%02d-%d-c0ffee", k, i) }
		var targets []records.ID
		var clock []uint64
		for i := range n {
			appendN(t, l, "th_stop", 1, func(int) map[string]any { return map[string]any{"keep": i} })
			e := appendN(t, l, "th_stop", 1, func(int) map[string]any { return map[string]any{"secret": marker(i)} })[0]
			targets, clock = append(targets, e.ID), append(clock, e.Clock)
		}
		for i := range n {
			if !dirHolds(t, dir, marker(i)) {
				t.Fatalf("marker %d not on disk before the erasure: the test would prove nothing", i)
			}
		}
		calls, deleted, stoppedAt := 0, 0, ""
		stop := stopAt(func(step string) error {
			calls++
			if calls < k {
				if step == stepDeleted {
					deleted++
				}
				return nil
			}
			stoppedAt = step
			if step == stepIntent || step == stepDeleted {
				next := deleted
				if step == stepDeleted {
					next++
				}
				if next < n {
					// The server dies in the secure delete of the next target,
					// its tombstone written and its block not rewritten yet.
					s, err := l.c.JS.Stream(ctxT(t), l.opts.Stream)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.DeleteMsg(ctxT(t), clock[next]); err != nil {
						t.Fatalf("plain delete of %d: %v", clock[next], err)
					}
				}
			}
			return crash
		})
		_, err := l.Erase(ctxT(t), "th_stop", targets, "stop test", actor, stop)
		if err == nil {
			if k < 5 {
				t.Fatalf("the erasure was never stopped")
			}
			l.Close()
			break // past the last step
		}
		if !errors.Is(err, crash) {
			t.Fatalf("stop %d: Erase: %v, want the injected crash", k, err)
		}
		l.Close()
		// The next process to open the log finishes the erasure.
		l2 := openTest(t, dir)
		for i, id := range targets {
			if _, err := l2.Get(ctxT(t), id, "th_stop"); !errors.Is(err, ErrNotFound) {
				t.Errorf("stop %d (%s): target %d after reopen: %v, want ErrNotFound", k, stoppedAt, i, err)
			}
		}
		if got := len(readAll(t, l2, "th_stop")); got != n+1 {
			t.Errorf("stop %d (%s): %d records read after reopen, want %d kept and the erasure", k, stoppedAt, got, n+1)
		}
		l2.Close()
		for i := range n {
			if dirHolds(t, dir, marker(i)) {
				t.Errorf("stop %d (%s): the body of target %d is still on disk", k, stoppedAt, i)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "erasing")); len(ents) != 0 {
			t.Errorf("stop %d (%s): intents left after the erasure finished: %v", k, stoppedAt, ents)
		}
	}
}
