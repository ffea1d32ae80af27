package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// A rule holds whichever face writes: a thread's keep-last-2 retention
// policy keeps the last two of four checkpoints whether they came through
// spl session save, spl emit, the Go SDK's Emit or POST /v1/records. Every
// face reaches the one write path of the service layer (sdk.Client.Append)
// and so the one home of the retention rule; before it, only
// SaveCheckpoint applied it.
func TestRetentionHoldsThroughEveryFace(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	srv := serveHome(t, h)
	server := srv.nats
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	remote := func(args ...string) []string { return append([]string{"--server", server}, args...) }

	goClient, err := sdk.Connect(ctx, server, sdk.WithActor(seedActor), sdk.WithNATSOptions(nats.Token(srv.writeTok)))
	if err != nil {
		t.Fatal(err)
	}
	defer goClient.Close()

	faces := []struct {
		name string
		save func(t *testing.T, thread, summary string)
	}{
		{"spl session save", func(t *testing.T, thread, summary string) {
			h.mustRun(t, nil, remote("session", "save", "--thread", thread, "--summary", summary, "--learnings", "l")...)
		}},
		{"spl emit", func(t *testing.T, thread, summary string) {
			h.mustRun(t, nil, remote("emit", "--thread", thread, "--act", "LEARN", "--kind", records.KindCheckpoint,
				"--body", fmt.Sprintf(`{"summary":%q,"learnings":["l"]}`, summary))...)
		}},
		{"sdk.Emit", func(t *testing.T, thread, summary string) {
			_, err := goClient.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: thread,
				Body: &records.Checkpoint{Summary: summary, Learnings: []string{"l"}}})
			if err != nil {
				t.Fatalf("Emit: %v", err)
			}
		}},
		{"POST /v1/records", func(t *testing.T, thread, summary string) {
			body := fmt.Sprintf(`{"thread":%q,"act":"LEARN","kind":%q,"actor":%q,"body":{"summary":%q,"learnings":["l"]}}`,
				thread, records.KindCheckpoint, seedActor, summary)
			if code, answer := do(t, http.MethodPost, srv.http+"/v1/records", srv.writeTok, body); code != http.StatusCreated {
				t.Fatalf("POST /v1/records: %d %s", code, answer)
			}
		}},
	}
	for i, face := range faces {
		t.Run(face.name, func(t *testing.T) {
			thread := fmt.Sprintf("th_face_%d", i)
			h.mustRun(t, nil, remote("retention", "set", "--thread", thread, "--keep-last", "2")...)
			for _, s := range []string{"c0", "c1", "c2", "c3"} {
				face.save(t, thread, s)
			}
			list := decode[[]record](t, h.mustRun(t, nil, remote("--json", "session", "list", "--thread", thread)...).stdout)
			var got []string
			for _, r := range list {
				got = append(got, r.Summary)
			}
			if strings.Join(got, " ") != "c2 c3" {
				t.Fatalf("checkpoints kept after four saves through %s: %q, want [c2 c3]; serve logs:\n%s", face.name, got, srv.logs.String())
			}
			tomb := h.mustRun(t, nil, remote("thread", "tail", thread, "--tombstones")...).stdout
			if !strings.Contains(tomb, "retention") {
				t.Fatalf("no erasure by retention on %s:\n%s", thread, tomb)
			}
		})
	}
}
