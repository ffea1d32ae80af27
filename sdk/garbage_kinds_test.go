package sdk_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// TestGarbageOnEveryKind: a message that is no record, as the newest on
// the subject of each kind the service layer reads to decide something
// (session status events, transcripts, checkpoints, pins, erasures,
// policies: retention and redaction, the thread's own and the reserved
// threads', actor key bindings), never stops the everyday calls on the
// thread: save, list, show, pause, resume, emit, retention. A policy is
// the exception, on purpose: the newest policy record not verifying, an
// older one is not taken in its place (it might redact or keep less), so
// appends to the thread are refused (redaction) or its retention stops
// (retention; the checkpoint is saved), naming the message; erasing it by
// its clock puts everything right.
func TestGarbageOnEveryKind(t *testing.T) {
	for _, g := range []struct {
		thread, kind string
	}{
		{"", records.KindCheckpoint},
		{"", records.KindTranscript},
		{"", records.KindSessionPaused},
		{"", records.KindSessionResumed},
		{"", records.KindSessionFailed},
		{"", records.KindSessionCompleted},
		{"", records.KindSessionCancelled},
		{"", records.KindPin},
		{"", records.KindErasure},
		{"", records.KindRetention},
		{"", records.KindRedaction},
		{records.RetentionThread, records.KindRetention},
		{records.RedactionThread, records.KindRedaction},
		{records.ActorThread, records.KindActorKey},
	} {
		name := g.kind
		if g.thread != "" {
			name = g.thread + "/" + g.kind
		}
		t.Run(name, func(t *testing.T) {
			c := open(t, sdk.WithActor(actor))
			ctx := ctxT(t)
			const thread = "th_g"
			one := saveCP(t, c, thread, "one", "")
			// Something of every kind first, so that the garbage is the
			// newest of its kind: policies the reads must still find.
			for _, err := range []error{
				func() error {
					_, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: thread, KeepLast: 5})
					return err
				}(),
				func() error {
					_, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 5})
					return err
				}(),
				func() error {
					_, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: thread, Keys: []string{"api_key"}})
					return err
				}(),
				func() error {
					_, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{All: true, Keys: []string{"secret"}})
					return err
				}(),
				func() error { _, err := c.Pin(ctx, thread, "", one.ID, ""); return err }(),
				func() error { _, err := c.PauseSession(ctx, thread, "", sdk.PauseOptions{Reason: "first"}); return err }(),
				func() error { _, err := c.ResumeSession(ctx, thread, "", sdk.ResumeOptions{}); return err }(),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			on := g.thread
			if on == "" {
				on = thread
			}
			ack, err := sdk.JetStreamOf(c).PublishMsg(ctx, &nats.Msg{Subject: log.RecordSubject(on, g.kind), Data: []byte("not a record")})
			if err != nil {
				t.Fatal(err)
			}
			if g.kind == records.KindRedaction || g.kind == records.KindRetention {
				var err error
				if g.kind == records.KindRedaction {
					_, err = c.SaveCheckpoint(ctx, thread, "", records.Checkpoint{Summary: "held", Learnings: []string{"l"}})
				} else {
					governed := thread // by its own policy, or by the policy of all threads
					if g.thread != "" {
						governed = "th_no_policy_of_its_own"
					}
					_, err = c.RetentionFor(ctx, governed)
				}
				if !errors.Is(err, records.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("clock %d", ack.Sequence)) {
					t.Fatalf("over a policy that does not verify: %v; want it named (records.ErrCorrupt, clock %d)", err, ack.Sequence)
				}
				if _, err := c.EraseMessages(ctx, on, "", []uint64{ack.Sequence}, "a policy that is no record"); err != nil {
					t.Fatalf("EraseMessages of the policy that is no record: %v", err)
				}
			}
			step := func(what string, err error) {
				t.Helper()
				if _, skipped := sdk.Skipped(err); err != nil && !skipped {
					t.Errorf("%s: %v", what, err)
				}
			}
			_, err = c.SaveCheckpoint(ctx, thread, "", records.Checkpoint{Summary: "two", Learnings: []string{"l"}})
			step("SaveCheckpoint", err)
			r, err := c.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: thread, Body: map[string]any{"t": "x", "api_key": "k", "secret": "s"}})
			step("Emit", err)
			if err == nil {
				got, err := c.Record(ctx, r.ID, thread)
				var body map[string]any
				if err == nil {
					err = got.DecodeBody(&body)
				}
				if err != nil || body["api_key"] != nil || body["secret"] != nil || body["t"] != "x" {
					t.Errorf("the record emitted after the garbage: %v, %v; want api_key and secret redacted by the policies before it", body, err)
				}
			}
			_, err = c.ListCheckpoints(ctx, thread, 0)
			step("ListCheckpoints", err)
			_, err = c.LatestCheckpoint(ctx, thread)
			step("LatestCheckpoint", err)
			_, err = c.Session(ctx, thread, sdk.Freshness{Fresh: true})
			step("Session", err)
			_, err = c.Sessions(ctx, sdk.SessionFilter{})
			step("Sessions", err)
			_, err = c.PauseSession(ctx, thread, "", sdk.PauseOptions{Reason: "break"})
			step("PauseSession", err)
			_, err = c.ResumeSession(ctx, thread, "", sdk.ResumeOptions{})
			step("ResumeSession", err)
			_, err = c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: thread, KeepLast: 1, MaxAge: time.Hour})
			step("SetRetention", err)
			_, err = c.ApplyRetention(ctx, "")
			step("ApplyRetention", err)
			_, err = c.Threads(ctx, sdk.ThreadFilter{Freshness: sdk.Freshness{Fresh: true}})
			step("Threads", err)
			rep, err := c.VerifyAll(ctx, nil)
			want := 1 // the garbage, named
			if g.kind == records.KindRedaction || g.kind == records.KindRetention {
				want = 0 // erased
			}
			if err != nil || len(rep.Corrupt) != want || len(rep.Missing) != 0 {
				t.Errorf("VerifyAll: corrupt %v, missing %v, %v; want %d corrupt, none missing", rep.Corrupt, rep.Missing, err, want)
			}
		})
	}
}
