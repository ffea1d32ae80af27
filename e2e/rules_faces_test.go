package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// Each rule gives one outcome whichever face writes to spl serve with the
// write token: the CLI with --server, the Go SDK over NATS (through the
// door), POST /v1/records, and the Python and TypeScript SDKs (their
// emit, in a process of their own). A redaction policy takes its key out of
// the body; a checkpoint without a summary is refused naming the field;
// an actor key binding is refused for want of the admin right. Every face
// reaches the one service layer, so none of them decides.
func TestRulesThroughEveryFace(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	srv := serveHome(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	goClient, err := sdk.Connect(ctx, srv.nats, sdk.WithActor(seedActor), sdk.WithNATSOptions(nats.Token(srv.writeTok)))
	if err != nil {
		t.Fatal(err)
	}
	defer goClient.Close()

	// outcome is what a face's write came to: "ok", "invalid <field>" or
	// "needs admin".
	faces := []face{
		{"spl emit --server", func(t *testing.T, thread, act, kind, body string) string {
			r := h.run(t, nil, "--server", srv.nats, "emit", "--thread", thread, "--act", act, "--kind", kind, "--body", body)
			switch {
			case r.code == 0:
				return "ok"
			case strings.Contains(r.stderr, "needs the admin right"):
				return "needs admin"
			case r.code == 1 && strings.Contains(r.stderr, "summary"):
				return "invalid summary"
			}
			return fmt.Sprintf("exit %d: %s", r.code, r.stderr)
		}},
		{"Go SDK over NATS", func(t *testing.T, thread, act, kind, body string) string {
			_, err := goClient.Emit(ctx, sdk.Event{Act: act, Kind: kind, Thread: thread, Body: records.RawBody(mustCBOR(t, body))})
			var fe *records.FieldError
			switch {
			case err == nil:
				return "ok"
			case errors.Is(err, sdk.ErrNeedsAdmin):
				return "needs admin"
			case errors.As(err, &fe) && strings.Contains(fe.Field, "summary"):
				return "invalid summary"
			}
			return err.Error()
		}},
		{"POST /v1/records", func(t *testing.T, thread, act, kind, body string) string {
			req := fmt.Sprintf(`{"thread":%q,"act":%q,"kind":%q,"actor":%q,"body":%s}`, thread, act, kind, seedActor, body)
			code, answer := do(t, http.MethodPost, srv.http+"/v1/records", srv.writeTok, req)
			switch {
			case code == http.StatusCreated:
				return "ok"
			case code == http.StatusForbidden && strings.Contains(answer, "admin"):
				return "needs admin"
			case code == http.StatusBadRequest && strings.Contains(answer, "summary"):
				return "invalid summary"
			}
			return fmt.Sprintf("%d %s", code, answer)
		}},
	}
	faces = append(faces, sdkFaces(t, srv)...)
	_, bindDID, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			thread := fmt.Sprintf("th_rules_%d", i)
			if _, err := goClient.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: thread, Keys: []string{"secret"}}); err != nil {
				t.Fatal(err)
			}
			if got := f.emit(t, thread, "SAY", "note.text", `{"text":"hi","secret":"s3cr3t"}`); got != "ok" {
				t.Fatalf("a note: %s", got)
			}
			var notes []record
			for _, r := range decode[[]record](t, h.mustRun(t, nil, "--server", srv.nats, "--json", "thread", "tail", thread).stdout) {
				if r.Kind == "note.text" {
					notes = append(notes, r)
				}
			}
			if len(notes) != 1 || strings.Contains(string(notes[0].Body), "s3cr3t") || !strings.Contains(string(notes[0].Body), "hi") {
				t.Errorf("the note as stored: %+v, want its text without the covered key", notes)
			}
			if got := f.emit(t, thread, "LEARN", records.KindCheckpoint, `{"learnings":["l"]}`); got != "invalid summary" {
				t.Errorf("a checkpoint without a summary: %s, want refused naming summary", got)
			}
			bind := fmt.Sprintf(`{"actor":"did:sync:agent:bound","public_key":%q}`, bindDID)
			if got := f.emit(t, records.ActorThread, "KNOW", records.KindActorKey, bind); got != "needs admin" {
				t.Errorf("an actor key binding with the write token: %s, want refused for the admin right", got)
			}
		})
	}
}

// face is one way to write to spl serve: emit returns what the write came
// to, "ok", "invalid <field>" or "needs admin".
type face struct {
	name string
	emit func(t *testing.T, thread, act, kind, body string) string
}

// The SDKs' emit in a process of their own, printing the outcome as the
// faces name it from the error type the SDK raises.
const (
	pyFace = `import asyncio, json, sys
import spl
async def main():
    c = await spl.connect(actor=sys.argv[1])
    try:
        await c.emit(thread=sys.argv[2], act=sys.argv[3], kind=sys.argv[4], body=json.loads(sys.argv[5]))
        print("ok")
    except spl.InvalidError as e:
        print("invalid", e.field, e)
    except spl.ForbiddenError as e:
        print("forbidden", e)
    finally:
        await c.close()
asyncio.run(main())
`
	tsFace = `const { connect, InvalidError, ForbiddenError } = await import(process.argv[1]);
const [actor, thread, act, kind, body] = process.argv.slice(2);
const c = await connect({ actor });
try {
  await c.emit({ thread, act, kind, body: JSON.parse(body) });
  console.log("ok");
} catch (e) {
  if (e instanceof InvalidError) console.log("invalid", e.field, e.message);
  else if (e instanceof ForbiddenError) console.log("forbidden", e.message);
  else console.log("error", e);
} finally {
  await c.close();
}
`
)

// sdkFaces are the Python and TypeScript faces this machine can run (as
// the runners' test finds them: with SPL_RUNNERS_ALL=1 a face that cannot
// run fails the test).
func sdkFaces(t *testing.T, srv *served) []face {
	t.Helper()
	py, node, dist := sdkRunners(t)
	outcome := func(t *testing.T, argv []string) string {
		t.Helper()
		got, err := runSDK(t, srv, argv)
		switch {
		case err != nil:
			return fmt.Sprintf("%v: %s", err, got)
		case got == "ok":
			return "ok"
		case strings.HasPrefix(got, "invalid ") && strings.Contains(got, "summary"):
			return "invalid summary"
		case strings.HasPrefix(got, "forbidden ") && strings.Contains(got, "admin"):
			return "needs admin"
		}
		return got
	}
	var faces []face
	if py != "" {
		faces = append(faces, face{"Python SDK", func(t *testing.T, thread, act, kind, body string) string {
			return outcome(t, []string{py, "-c", pyFace, seedActor, thread, act, kind, body})
		}})
	}
	if node != "" {
		faces = append(faces, face{"TypeScript SDK", func(t *testing.T, thread, act, kind, body string) string {
			return outcome(t, []string{node, "--input-type=module", "-e", tsFace, "file://" + dist, seedActor, thread, act, kind, body})
		}})
	}
	return faces
}

// sdkRunners finds what runs the Python and TypeScript SDKs here: python3,
// and node with the built sdk/typescript (dist, its entry point), each
// "" when missing (as the runners' test finds them: with
// SPL_RUNNERS_ALL=1 a face that cannot run fails the test).
func sdkRunners(t *testing.T) (py, node, dist string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	all := os.Getenv("SPL_RUNNERS_ALL") == "1"
	if py, err = exec.LookPath("python3"); err != nil {
		if all {
			t.Fatal("SPL_RUNNERS_ALL=1 but python3 is not on PATH")
		}
		py = ""
	}
	dist = filepath.Join(root, "sdk/typescript/dist/index.js")
	node, err = exec.LookPath("node")
	switch {
	case err == nil && exists(dist):
	case all:
		t.Fatal("SPL_RUNNERS_ALL=1 but node or the built sdk/typescript is missing")
	default:
		t.Log("the TypeScript face is left out: node, or sdk/typescript built (npm ci && npm run build), is missing")
		node = ""
	}
	return py, node, dist
}

// runSDK runs argv, a program of the Python or TypeScript SDK, against
// srv with the write token, and returns what it printed, trimmed.
func runSDK(t *testing.T, srv *served, argv []string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = append(os.Environ(), "SPL_URL="+srv.http, "SPL_TOKEN="+srv.writeTok, "PYTHONPATH="+filepath.Join(root, "sdk/python/src"))
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mustCBOR is the canonical CBOR body of a JSON object.
func mustCBOR(t *testing.T, js string) []byte {
	t.Helper()
	if !json.Valid([]byte(js)) {
		t.Fatalf("not JSON: %s", js)
	}
	b, err := records.BodyFromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
