package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// The session rules are decided once, in the service layer (rules.Resumable
// and rules.ResumeFrom), and every face only shows the decision: which
// sessions are to resume, and which checkpoint a resume takes up or why it
// is refused. Each face gets sessions of its own, the same four:
//
//   - fail: failed, with a clean checkpoint under a dirty one: resumable,
//     and a resume takes up the clean one, not the newest;
//   - dirty: failed, with no clean checkpoint: not resumable, and a resume
//     is refused for want of a checkpoint to take up;
//   - paused: resumable;
//   - running: not resumable.
//
// The faces: the CLI on the data directory and with --server, the Go SDK
// on the data directory and over NATS, the HTTP API, the Python and
// TypeScript SDKs (each in a process of its own), and the reviewer's page
// in a browser, which offers Resume only where the API says and so never
// gets to try the refused resume.
func TestSessionRulesThroughEveryFace(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor, "SPL_TOKEN_FILE="+h.dir+"/token")
	srv := serveHome(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	remote, err := sdk.Connect(ctx, srv.nats, sdk.WithActor(seedActor), sdk.WithNATSOptions(nats.Token(srv.writeTok)))
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	local, err := sdk.Open(ctx, sdk.WithDir(h.dir), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()

	faces := []sessionFace{
		cliSessionFace("spl (data directory)", h, nil),
		cliSessionFace("spl --server", h, []string{"--server", srv.nats}),
		goSessionFace("Go SDK (data directory)", local),
		goSessionFace("Go SDK over NATS", remote),
		httpSessionFace(srv),
	}
	faces = append(faces, sdkSessionFaces(t, srv)...)
	if p := pageSessionFace(t, srv, remote); p != nil {
		faces = append(faces, *p)
	}

	yes, no := true, false
	for i, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			th := func(s string) string { return fmt.Sprintf("sr%d_%s", i, s) }
			save := func(thread string, st records.ExecState) records.ID {
				t.Helper()
				r, err := remote.SaveCheckpoint(ctx, thread, "", records.Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: st.Put(nil)})
				if err != nil {
					t.Fatal(err)
				}
				return r.ID
			}
			fail := func(thread string) {
				t.Helper()
				if _, err := remote.MarkSession(ctx, thread, "", records.KindSessionFailed, records.SessionEvent{Error: "boom", Node: "b"}); err != nil {
					t.Fatal(err)
				}
			}
			clean := save(th("fail"), records.ExecState{Type: records.CheckpointNodeComplete, CurrentNode: "a", IsClean: &yes})
			save(th("fail"), records.ExecState{Type: records.CheckpointNodeStart, CurrentNode: "b", IsClean: &no})
			fail(th("fail"))
			save(th("dirty"), records.ExecState{Type: records.CheckpointNodeStart, CurrentNode: "a", IsClean: &no})
			fail(th("dirty"))
			save(th("paused"), records.ExecState{})
			if _, err := remote.PauseSession(ctx, th("paused"), "", sdk.PauseOptions{}); err != nil {
				t.Fatal(err)
			}
			save(th("running"), records.ExecState{})

			var mine []string
			for _, s := range f.resumable(t) {
				if strings.HasPrefix(s, th("")) {
					mine = append(mine, strings.TrimPrefix(s, th("")))
				}
			}
			slices.Sort(mine)
			if want := []string{"fail", "paused"}; !slices.Equal(mine, want) {
				t.Errorf("listed as resumable: %v, want %v", mine, want)
			}
			if got, want := f.resume(t, th("fail")), "from "+clean.String(); got != want {
				t.Errorf("resume of the failed session: %s, want %s (its clean checkpoint)", got, want)
			}
			got := f.resume(t, th("dirty"))
			if want := "refused: no checkpoint to resume from"; got != want && !(f.offersOnly && got == notOffered) {
				t.Errorf("resume of the failed session without a clean checkpoint: %s, want %s", got, want)
			}
		})
	}
}

// sessionFace is one face's view of the session rules: the sessions it
// lists as resumable, and what a resume of a thread came to: "from ID"
// (the checkpoint taken up), "refused: no checkpoint to resume from", or
// notOffered (offersOnly: the face offers no resume where the API says
// there is none).
type sessionFace struct {
	name       string
	resumable  func(t *testing.T) []string
	resume     func(t *testing.T, thread string) string
	offersOnly bool
}

// notOffered is the page's answer where it shows no Resume button.
const notOffered = "not offered"

// resumeOutcome names what a resume came to from the error text a face
// shows: refused for want of a checkpoint, or the text itself.
func resumeOutcome(text string) string {
	if strings.Contains(text, "no checkpoint to resume from") {
		return "refused: no checkpoint to resume from"
	}
	return text
}

// sessionIDs are the session_id fields of a sessions listing.
func sessionIDs(t *testing.T, js string) []string {
	t.Helper()
	var out []string
	for _, s := range decode[struct {
		Sessions []struct {
			ID string `json:"session_id"`
		} `json:"sessions"`
	}](t, js).Sessions {
		out = append(out, s.ID)
	}
	return out
}

func cliSessionFace(name string, h *home, pre []string) sessionFace {
	args := func(a ...string) []string { return append(slices.Clone(pre), a...) }
	return sessionFace{name: name,
		resumable: func(t *testing.T) []string {
			return sessionIDs(t, h.mustRun(t, nil, args("--json", "session", "list", "--resumable", "-n", "1000")...).stdout)
		},
		resume: func(t *testing.T, thread string) string {
			r := h.run(t, nil, args("--json", "session", "resume", thread)...)
			if r.code != 0 {
				return resumeOutcome(fmt.Sprintf("exit %d: %s", r.code, r.stderr))
			}
			return "from " + decode[struct {
				From string `json:"resumed_from"`
			}](t, r.stdout).From
		},
	}
}

func goSessionFace(name string, c *sdk.Client) sessionFace {
	return sessionFace{name: name,
		resumable: func(t *testing.T) []string {
			ss, err := c.Sessions(context.Background(), sdk.SessionFilter{Resumable: true, Freshness: sdk.Freshness{Fresh: true}})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, s := range ss {
				out = append(out, s.Thread)
			}
			return out
		},
		resume: func(t *testing.T, thread string) string {
			rc, err := c.ResumeSession(context.Background(), thread, "", sdk.ResumeOptions{})
			switch {
			case errors.Is(err, sdk.ErrNoResumePoint):
				return resumeOutcome(err.Error())
			case err != nil:
				return err.Error()
			}
			return "from " + rc.From.ID.String()
		},
	}
}

func httpSessionFace(srv *served) sessionFace {
	return sessionFace{name: "HTTP API",
		resumable: func(t *testing.T) []string {
			code, body := do(t, http.MethodGet, srv.http+"/v1/sessions?resumable=true&limit=1000", srv.writeTok, "")
			if code != http.StatusOK {
				t.Fatalf("GET /v1/sessions: %d %s", code, body)
			}
			return sessionIDs(t, body)
		},
		resume: func(t *testing.T, thread string) string {
			code, body := do(t, http.MethodPost, srv.http+"/v1/threads/"+thread+"/resume", srv.writeTok, fmt.Sprintf(`{"actor":%q}`, seedActor))
			if code != http.StatusOK {
				return resumeOutcome(fmt.Sprintf("%d %s", code, body))
			}
			return "from " + decode[struct {
				From string `json:"resumed_from"`
			}](t, body).From
		},
	}
}

// The Python and TypeScript programs of the session faces: "list" prints
// the resumable sessions' ids as JSON, "resume THREAD" what the resume
// came to.
const (
	pySessionFace = `import asyncio, json, sys
import spl
async def main():
    c = await spl.connect(actor=sys.argv[1])
    try:
        if sys.argv[2] == "list":
            r = await c.sessions(resumable=True, limit=1000)
            print(json.dumps({"sessions": r["sessions"]}))
        else:
            try:
                r = await c.resume(sys.argv[3])
                print("from " + r["resumed_from"])
            except spl.ConflictError as e:
                print("conflict", e)
    finally:
        await c.close()
asyncio.run(main())
`
	tsSessionFace = `const { connect, ConflictError } = await import(process.argv[1]);
const [actor, op, thread] = process.argv.slice(2);
const c = await connect({ actor });
try {
  if (op === "list") {
    const r = await c.sessions({ resumable: true, limit: 1000 });
    console.log(JSON.stringify({ sessions: r.sessions }));
  } else {
    try {
      const r = await c.resume(thread);
      console.log("from " + r.resumed_from);
    } catch (e) {
      if (e instanceof ConflictError) console.log("conflict", e.message);
      else throw e;
    }
  }
} finally {
  await c.close();
}
`
)

func sdkSessionFaces(t *testing.T, srv *served) []sessionFace {
	t.Helper()
	py, node, dist := sdkRunners(t)
	face := func(name string, argv ...string) sessionFace {
		run := func(t *testing.T, a ...string) string {
			t.Helper()
			out, err := runSDK(t, srv, append(slices.Clone(argv), a...))
			if err != nil {
				t.Fatalf("%s %v: %v: %s", name, a, err, out)
			}
			return out
		}
		return sessionFace{name: name,
			resumable: func(t *testing.T) []string { return sessionIDs(t, run(t, "list")) },
			resume: func(t *testing.T, thread string) string {
				return resumeOutcome(run(t, "resume", thread))
			},
		}
	}
	var faces []sessionFace
	if py != "" {
		faces = append(faces, face("Python SDK", py, "-c", pySessionFace, seedActor))
	}
	if node != "" {
		faces = append(faces, face("TypeScript SDK", node, "--input-type=module", "-e", tsSessionFace, "file://"+dist, seedActor))
	}
	return faces
}

// pageSessionFace is the reviewer's page in Chromium, logged in with the
// write token (nil without a Chromium, as the page's own test skips); c
// reads back which checkpoint a resume from the page took up.
func pageSessionFace(t *testing.T, srv *served, c *sdk.Client) *sessionFace {
	t.Helper()
	chrome, ok := findChromium()
	if !ok {
		t.Log("the page's face is left out: no Chromium (apt-get install chromium)")
		return nil
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // starts the browser, bound to bctx alone
		t.Fatalf("start %s: %v", chrome, err)
	}
	login := tab{t, bctx}
	login.do("log in to the page with the write token", chromedp.Navigate(srv.http+"/"), chromedp.WaitVisible("#login-form"),
		chromedp.SendKeys("#token", srv.writeTok), chromedp.Click(`#login-form button[type="submit"]`), chromedp.WaitVisible("#app"))
	// offered lists the sessions the page shows a Resume button for, once
	// the listing of resumable sessions has been loaded again.
	offered := func(t *testing.T) []string {
		b := tab{t, bctx}
		eval[bool](b, `(() => {
			const box = document.getElementById("resumable");
			box.checked = true;
			document.querySelector("#sessions tbody").replaceChildren();
			box.dispatchEvent(new Event("change"));
			return true;
		})()`)
		b.waitTrue(`document.querySelector("#sessions tbody tr") !== null`)
		return eval[[]string](b, `[...document.querySelectorAll("#sessions tbody tr")]
			.filter(tr => [...tr.querySelectorAll("button")].some(x => x.textContent === "Resume"))
			.map(tr => tr.dataset.thread)`)
	}
	return &sessionFace{name: "the reviewer's page", offersOnly: true,
		resumable: offered,
		resume: func(t *testing.T, thread string) string {
			if !slices.Contains(offered(t), thread) {
				return notOffered
			}
			b := tab{t, bctx}
			b.do("resume "+thread, chromedp.Click(`#sessions tr[data-thread="`+thread+`"] button:not(.link)`))
			b.waitText("#status", "Resumed "+thread)
			ev, err := c.Latest(context.Background(), thread, records.KindSessionResumed)
			if err != nil {
				t.Fatalf("the resume record of %s: %v", thread, err)
			}
			e, err := records.DecodeSessionEvent(ev.Header.Kind, ev.Body)
			if err != nil {
				t.Fatalf("the resume record of %s: %v", thread, err)
			}
			return "from " + e.Checkpoint
		},
	}
}
