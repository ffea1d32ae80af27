package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
	port, httpPort := freePort(t), freePort(t)
	server := natsURL(port)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, _ := h.cmd(ctx, nil, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	var logs lockedBuffer
	c.Stderr = &logs
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = c.Wait()
	})
	waitFor(t, 30*time.Second, "spl serve ready", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	remote := func(args ...string) []string { return append([]string{"--server", server}, args...) }

	goClient, err := sdk.Connect(ctx, server, sdk.WithActor(seedActor))
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
			resp, err := http.Post(base+"/v1/records", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /v1/records: %s", resp.Status)
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
				t.Fatalf("checkpoints kept after four saves through %s: %q, want [c2 c3]; serve logs:\n%s", face.name, got, logs.String())
			}
			tomb := h.mustRun(t, nil, remote("thread", "tail", thread, "--tombstones")...).stdout
			if !strings.Contains(tomb, "retention") {
				t.Fatalf("no erasure by retention on %s:\n%s", thread, tomb)
			}
		})
	}
}
