package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// chromium finds a Chromium to drive: SPL_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH. Without one the test skips.
func chromium(t *testing.T) string {
	t.Helper()
	if p, ok := findChromium(); ok {
		return p
	}
	t.Skip("no Chromium on PATH (chromium, chromium-browser, google-chrome) and SPL_CHROMIUM unset: the reviewer's page is not tried in a browser (apt-get install chromium)")
	return ""
}

// findChromium is the Chromium chromium finds, and whether there is one.
func findChromium() (string, bool) {
	if p := os.Getenv("SPL_CHROMIUM"); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// tab drives one browser tab, each step bounded.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// do runs actions, failing the test on an error.
func (b tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

// until waits until the JavaScript expression is true, through
// navigations (an evaluation that fails is tried again), and reports
// whether it was within 30 s.
func (b tab) until(expr string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// waitText waits until the text of the element sel holds want.
func (b tab) waitText(sel, want string) {
	b.t.Helper()
	if !b.until(fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "").includes(%q)`, sel, want)) {
		got := eval[string](b, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? "(no element)"`, sel))
		b.t.Fatalf("browser: %s never showed %q; it shows %q (status: %q)", sel, want, got, eval[string](b, `document.getElementById("status")?.textContent ?? ""`))
	}
}

// waitTrue waits until the JavaScript expression is true.
func (b tab) waitTrue(expr string) {
	b.t.Helper()
	if !b.until(expr) {
		b.t.Fatalf("browser: %s never held", expr)
	}
}

// cookies are the browser's cookies for u.
func (b tab) cookies(u string) []*network.Cookie {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
	if err != nil {
		b.t.Fatalf("browser: cookies: %v", err)
	}
	return res.Cookies
}

// sessionStatus is the status of a session, asked with the read token.
func sessionStatus(t *testing.T, srv *served, thread string) string {
	t.Helper()
	code, body := do(t, "GET", srv.http+"/v1/sessions", srv.readTok, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/sessions: %d %s", code, body)
	}
	for _, s := range decode[wire.Sessions](t, body).Sessions {
		if s.SessionID == thread {
			return s.Status
		}
	}
	return ""
}

// TestPageReview drives the reviewer's page in a real browser against
// the built spl serve: a login with the read token shows sessions,
// checkpoints, a run and a record arriving live, keeps its cookie out of
// the page's reach, and is refused a pause; a page of another origin
// that has the browser post with the cookie is refused; a login with the
// write token pauses.
func TestPageReview(t *testing.T) {
	chrome := chromium(t)
	began := time.Now()
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor)
	srv := serveHome(t, h)

	// What the agents did, through the CLI and the SDK. The summary is
	// markup, as an agent's text may be: the page must show it as text.
	const th = "th_page_review"
	const markup = `<img src=x onerror="window.pwned=1">Reviewed <b>auth</b>`
	h.mustRun(t, nil, "emit", "--thread", th, "--act", "SAY", "--kind", records.KindTranscript, "--body", `{"agentId":"lead","type":"message","content":"plan"}`)
	h.mustRun(t, nil, "session", "save", "--thread", th, "--summary", markup, "--learnings", "mutex pattern worked", "--next-steps", "Write migration tests")
	ctx := context.Background()
	c, err := sdk.Connect(ctx, srv.nats, sdk.WithActor(seedActor), sdk.WithNATSOptions(nats.Token(srv.writeTok)))
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.OpenRun(ctx, "th_page_run", "run_page_1")
	if err != nil {
		t.Fatal(err)
	}
	_ = run.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{"agent_name": "reviewer-test"})
	_ = run.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": 3, "llm_calls": 2, "usage": map[string]any{"total_tokens": 120}})
	if _, err := run.Effect(ctx, "call_1", "grep", map[string]any{"q": "auth"}, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"3 hits"`), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Finish(ctx, sdk.Terminal{Result: map[string]any{"text": "all reviewed"}}); err != nil {
		t.Fatal(err)
	}
	// A run waiting for a person's approval.
	wait, err := c.OpenRun(ctx, "th_page_run", "run_page_wait")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait.AwaitSignal(ctx, "approval", map[string]any{"question": "ship it?"}, 0); !errors.Is(err, sdk.ErrStillWaiting) {
		t.Fatalf("AwaitSignal: %v", err)
	}
	if err := wait.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sessionStatus(t, srv, th); got != "running" {
		t.Fatalf("session %s: %q, want running", th, got)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	launch := time.Now()
	if err := chromedp.Do(bctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("start %s: %v", chrome, err)
	}
	started := time.Now()
	b := tab{t, bctx}
	var consoleMu sync.Mutex
	var console []string
	go func() {
		for m, err := range chromedp.Console(bctx) {
			if err != nil {
				return
			}
			consoleMu.Lock()
			console = append(console, string(m.Type)+": "+m.Text)
			consoleMu.Unlock()
		}
	}()

	// Log in with the read token.
	b.do("open the page", chromedp.Navigate(srv.http+"/"), chromedp.WaitVisible("#login-form"))
	b.do("log in with the read token", chromedp.SendKeys("#token", srv.readTok), chromedp.Click(`#login-form button[type="submit"]`), chromedp.WaitVisible("#app"))
	b.waitText("#who", "read right")
	if got := eval[string](b, `location.href`); got != srv.http+"/" {
		t.Errorf("location after login: %q, want %q: nothing in the URL", got, srv.http+"/")
	}

	// The cookie: HttpOnly, SameSite=Strict, not the token, not visible to the page.
	var login *network.Cookie
	for _, ck := range b.cookies(srv.http) {
		if ck.Name == "spl_login" {
			login = ck
		}
		if strings.Contains(ck.Value, srv.readTok) || strings.Contains(ck.Value, srv.writeTok) {
			t.Errorf("cookie %s holds a token", ck.Name)
		}
	}
	if login == nil || !login.HTTPOnly || login.SameSite != network.CookieSameSiteStrict || login.Path != "/" {
		t.Fatalf("login cookie %+v: want spl_login, HttpOnly, SameSite=Strict, Path=/", login)
	}
	if got := eval[string](b, `document.cookie`); got != "" {
		t.Errorf("document.cookie = %q, want the login cookie out of the page's reach", got)
	}

	// Sessions and runs, from the JSON API with the cookie.
	b.waitText("#sessions tbody", th)
	b.waitText(`#sessions tr[data-thread="`+th+`"]`, "running")
	b.waitText("#runs tbody", "run_page_1")
	b.waitText(`#runs tr[data-run="run_page_1"]`, "terminal")

	// A thread: its checkpoint as text, never as markup.
	b.do("open the session", chromedp.Click(`#sessions tr[data-thread="`+th+`"] button.link`))
	b.waitText("#checkpoints", markup)
	b.waitText("#checkpoints", "mutex pattern worked")
	b.waitText("#checkpoints", "Write migration tests")
	b.waitText("#lineage", "checkpoint")
	if eval[bool](b, `document.querySelector("#checkpoints img, #checkpoints b") !== null || window.pwned !== undefined`) {
		t.Fatalf("the checkpoint's summary became markup in the page")
	}
	// Resume is offered by what the API says of the session: not for a
	// running one.
	if eval[bool](b, `!document.getElementById("resume").hidden`) {
		t.Error("the page offers to resume a running session")
	}

	// Live: a record appended by the CLI arrives through SSE.
	b.do("follow the thread", chromedp.Click("#follow"))
	b.waitText("#follow-state", "following")
	h.mustRun(t, nil, "emit", "--thread", th, "--act", "DO", "--kind", "agent.step", "--body", `{"step":42,"note":"live from the CLI"}`)
	b.waitText("#live", "live from the CLI")
	// A checkpoint saved meanwhile appears in the thread's checkpoints
	// and records without a reload.
	h.mustRun(t, nil, "session", "save", "--thread", th, "--summary", "saved while the reviewer watched", "--learnings", "l")
	b.waitText("#checkpoints", "saved while the reviewer watched")
	b.waitText("#records", records.KindCheckpoint)

	// The read login is shown no write control; a write it sends anyway
	// (as a script in the page could) is refused by the server.
	for _, sel := range []string{"#pause", "#resume"} {
		if eval[bool](b, fmt.Sprintf(`!document.querySelector(%q).hidden`, sel)) {
			t.Errorf("the read login is offered %s", sel)
		}
	}
	if n := eval[int](b, `[...document.querySelectorAll("#app button")].filter((x) => x.offsetParent !== null && ["Pause", "Resume", "Pin"].includes(x.textContent)).length`); n != 0 {
		t.Errorf("the read login is offered %d Pause, Resume or Pin buttons", n)
	}
	if got := eval[int](b, `fetch("/v1/threads/`+th+`/pause", {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": state.csrf}, body: "{}"}).then((r) => r.status)`); got != http.StatusForbidden {
		t.Errorf("a pause with the read login: %d, want 403", got)
	}
	if got := sessionStatus(t, srv, th); got != "running" {
		t.Fatalf("after a pause with the read login the session is %q, want running", got)
	}

	// Every thread, not only sessions: a run's thread, opened from the
	// threads list, with its records each verified, one of them whole.
	const runThread = "th_page_run/run/run_page_1"
	b.waitText(`#threads tr[data-thread="`+runThread+`"]`, runThread)
	b.waitText(`#threads tr[data-thread="`+th+`"]`, "ago")
	b.do("open the run's thread", chromedp.Click(`#threads tr[data-thread="`+runThread+`"] button.link`))
	b.waitText("#thread-name", runThread)
	b.waitText("#records-state", "every one verified")
	// Its records: the run's phases and its effect (how many depends on
	// when its write-behind checkpoints landed), every one verified.
	if got := eval[[]int](b, `[document.querySelectorAll("#records .badge.verified").length, document.querySelectorAll("#records li").length]`); got[0] < 3 || got[0] != got[1] {
		t.Errorf("the run's thread shows %d verified records of %d, want all of at least 3", got[0], got[1])
	}
	b.do("inspect a record", chromedp.Click(`#records li button.link`))
	b.waitText("#record-raw", `"thread": "`+runThread+`"`)
	b.waitText("#record-raw", "CBOR envelope")
	b.waitText("#record-badge", "verified")
	// A link to the thread survives a reload.
	if got, want := eval[string](b, `location.hash`), "#thread=th_page_run%2Frun%2Frun_page_1"; got != want {
		t.Errorf("location.hash %q, want %q", got, want)
	}
	b.do("reload", chromedp.Reload())
	b.waitText("#thread-name", runThread)
	b.waitText("#records-state", "every one verified")
	// A filter: threads with a checkpoint, which the run's thread is not.
	b.do("filter by kind", chromedp.SetValue("#threads-kind", records.KindCheckpoint), chromedp.Click(`#threads-filter button[type="submit"]`))
	b.waitTrue(`document.querySelector('#threads tr[data-thread="` + runThread + `"]') === null && document.querySelector('#threads tr[data-thread="` + th + `"]') !== null`)
	b.do("open the session's thread again", chromedp.Click(`#threads tr[data-thread="`+th+`"] button.link`))
	b.waitText("#thread-name", th)

	// A run: phases, effects, result.
	b.do("open the run", chromedp.Click(`#runs tr[data-run="run_page_1"] button.link`))
	b.waitText("#run-facts", "terminal")
	b.waitText("#run-facts", "1 recorded")
	b.waitText("#phases", "run_started")
	b.waitText("#phases", "run_terminal")
	b.waitText("#effects", "grep")
	b.waitText("#run-result", "all reviewed")
	// A waiting run: what it waits for; no action for the read login.
	b.do("open the waiting run", chromedp.Click(`#runs tr[data-run="run_page_wait"] button.link`))
	b.waitText("#run-facts", "waits for")
	b.waitText("#run-facts", "approval")
	if eval[bool](b, `!document.getElementById("run-actions").hidden`) {
		t.Error("the read login is offered the run's actions")
	}

	// Logout: the cookie goes, the API answers 401 to the page.
	b.do("log out", chromedp.Click("#logout"), chromedp.WaitVisible("#login-form"))
	for _, ck := range b.cookies(srv.http) {
		if ck.Name == "spl_login" {
			t.Errorf("cookie after logout: %+v", ck)
		}
	}
	if got := eval[int](b, `fetch("/v1/sessions").then(r => r.status)`); got != http.StatusUnauthorized {
		t.Errorf("GET /v1/sessions from the page after logout: %d, want 401", got)
	}

	// Log in with the write token, then let a page of another origin
	// (another port of the same host: the same site, so the browser sends
	// the SameSite=Strict cookie with its requests) try to pause.
	b.do("log in with the write token", chromedp.SendKeys("#token", srv.writeTok), chromedp.Click(`#login-form button[type="submit"]`), chromedp.WaitVisible("#app"))
	b.waitText("#who", "write right")
	pauseURL := srv.http + "/v1/threads/" + th + "/pause"
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body>
<form id="f" method="post" action="%[1]s" enctype="text/plain"><input name='{"actor":"did:sync:human:mallory","reason":"' value='"}'></form>
<script>
window.results = [];
const note = (what) => (v) => window.results.push(what + ": " + v);
fetch(%[1]q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: '{"actor":"did:sync:human:mallory"}'})
  .then((r) => note("no-cors post")(r.type), note("no-cors post error"));
fetch(%[1]q, {method: "POST", credentials: "include", headers: {"Content-Type": "application/json", "X-CSRF-Token": "guess"}, body: '{"actor":"did:sync:human:mallory"}'})
  .then((r) => note("cors post")(r.status), note("cors post error"));
fetch(%[2]q, {credentials: "include"})
  .then((r) => r.text()).then(note("steal the CSRF token"), note("steal the CSRF token error"));
</script></body></html>`, pauseURL, srv.http+"/v1/login")
	}))
	defer attacker.Close()
	evilCtx, cancelEvil := chromedp.NewContext(bctx) // a tab of the same browser: the same cookies
	defer cancelEvil()
	if err := chromedp.Do(evilCtx); err != nil { // opens the tab, for as long as evilCtx lives
		t.Fatalf("open a tab: %v", err)
	}
	evil := tab{t, evilCtx}
	evil.do("open the other origin's page", chromedp.Navigate(attacker.URL))
	evil.waitTrue(`window.results.length === 3`)
	results := eval[[]string](evil, `window.results`)
	for _, r := range results {
		if strings.Contains(r, "steal the CSRF token: ") {
			t.Errorf("the other origin read /v1/login: %s", r)
		}
	}
	evil.do("post the other origin's form", chromedp.Evaluate[chromedp.Void](`document.getElementById("f").submit()`))
	evil.waitTrue(`location.href.endsWith("/pause") && document.body.textContent.includes("{")`)
	formAnswer := eval[string](evil, `document.body.textContent`)
	if got := sessionStatus(t, srv, th); got != "running" {
		t.Fatalf("after the other origin's requests the session is %q, want running (results %v, form %s)", got, results, formAnswer)
	}
	if !strings.Contains(formAnswer, "forbidden") || !strings.Contains(formAnswer, `"field":"Origin"`) {
		t.Errorf("the form's answer is not 403 naming the rule: %s", formAnswer)
	}
	// The browser did send the cookie: the server refused the origin, not
	// a request without credentials.
	if n := strings.Count(srv.logs.String(), "http refused: cross-origin"); n < 3 {
		t.Errorf("the server refused %d requests with the cookie as cross-origin, want 3 (no-cors post, fetch of the login, form); results %v; log:\n%s", n, results, srv.logs.String())
	}
	cancelEvil()

	// The page itself pauses.
	pauseButton := `#sessions tr[data-thread="` + th + `"] button:not(.link)`
	b.waitTrue(fmt.Sprintf(`document.querySelector(%q)?.textContent === "Pause"`, pauseButton))
	b.do("pause with the write login", chromedp.Click(pauseButton))
	b.waitText("#status", "Paused "+th)
	if got := sessionStatus(t, srv, th); got != "paused" {
		t.Fatalf("after a pause with the write login the session is %q, want paused", got)
	}
	b.waitText(`#sessions tr[data-thread="`+th+`"]`, "paused")

	// The write login is offered nothing on a finished run (the server
	// says it cannot be cancelled), and the approval on the waiting one.
	b.do("open the finished run", chromedp.Click(`#runs tr[data-run="run_page_1"] button.link`))
	b.waitText("#run-facts", "terminal")
	if eval[bool](b, `!document.getElementById("run-actions").hidden`) {
		t.Error("the write login is offered actions on a finished run")
	}
	// The write login sends the waiting run its approval, with data.
	b.do("open the waiting run", chromedp.Click(`#runs tr[data-run="run_page_wait"] button.link`))
	b.waitText("#run-signal-name", "approval")
	b.do("send the approval", chromedp.SetValue("#run-signal-data", `{"approved": true, "note": "from the page"}`), chromedp.Click("#run-signal-send"))
	b.waitText("#status", "Sent approval to run_page_wait")
	code, body := do(t, "GET", srv.http+"/v1/runs/run_page_wait?thread=th_page_run", srv.readTok, "")
	if code != http.StatusOK || !strings.Contains(body, `"status":"running"`) {
		t.Fatalf("the run after the page's approval: %d %s", code, body)
	}
	code, body = do(t, "POST", srv.http+"/v1/runs/run_page_wait/open", srv.writeTok, `{"thread":"th_page_run"}`)
	if code != http.StatusOK || !strings.Contains(body, `"note":"from the page"`) || !strings.Contains(body, `"actor":"did:sync:human:reviewer"`) {
		t.Fatalf("the signal the page sent: %d %s", code, body)
	}

	consoleMu.Lock()
	for _, m := range console {
		if strings.Contains(m, "Content Security Policy") || strings.Contains(m, "exception") {
			t.Errorf("browser console: %s", m)
		}
	}
	consoleMu.Unlock()
	t.Logf("the whole test %s: Chromium started in %s, the browser's steps %s", time.Since(began).Round(time.Millisecond), started.Sub(launch).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}
