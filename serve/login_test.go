package serve

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// useClock makes s's logins read c.
func useClock(s *Server) *fakeClock {
	c := &fakeClock{t: time.Now()}
	s.logins.mu.Lock()
	s.logins.clock = c.now
	s.logins.mu.Unlock()
	return c
}

// browser sends requests as the page would: with the login cookie (when
// not nil), the server's Origin, and the CSRF token (when not "").
type browser struct {
	t      *testing.T
	client *http.Client
	base   string
	cookie *http.Cookie
	csrf   string
	origin string // "" for none
	site   string // Sec-Fetch-Site, "" for none
}

func newBrowser(t *testing.T, client *http.Client, base string) *browser {
	return &browser{t: t, client: client, base: base, origin: base, site: "same-origin"}
}

// do sends one request without a bearer token and returns the code, the
// header and the JSON error (or answer) decoded into out when not nil.
func (b *browser) do(method, path, body string, out any) (int, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	if b.csrf != "" {
		req.Header.Set(csrfHeader, b.csrf)
	}
	if b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	if b.site != "" {
		req.Header.Set("Sec-Fetch-Site", b.site)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			b.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// login logs b in with token and keeps the cookie and CSRF token.
func (b *browser) login(token string) (loginJSON, *http.Cookie) {
	b.t.Helper()
	var l loginJSON
	code, h := b.do("POST", "/v1/login", `{"token":"`+token+`"}`, &l)
	if code != http.StatusOK {
		b.t.Fatalf("login: %d %+v", code, l)
	}
	cookies := (&http.Response{Header: h}).Cookies()
	if len(cookies) != 1 {
		b.t.Fatalf("login: cookies %v, want one", cookies)
	}
	b.cookie, b.csrf = cookies[0], l.CSRFToken
	return l, cookies[0]
}

// emitThread appends a transcript record to thread with the write token:
// a running session.
func emitThread(t *testing.T, s *Server, thread string) {
	t.Helper()
	if code := call(t, "POST", base(s)+"/v1/records", emitBody(thread, "SAY", records.KindTranscript, `{"agentId":"lead","type":"message","content":"plan"}`), nil); code != http.StatusCreated {
		t.Fatalf("emit: %d", code)
	}
}

// TestLogin exchanges the read token for a login: the cookie's
// attributes, what it holds, what it may do, and logout.
func TestLogin(t *testing.T) {
	s := start(t, Config{})
	emitThread(t, s, "th_login")
	b := newBrowser(t, http.DefaultClient, base(s))
	l, c := b.login(s.cfg.HTTPReadToken)
	if got, want := l.Right, "read"; got != want {
		t.Errorf("right=%q, want %q", got, want)
	}
	if len(l.CSRFToken) < 43 || l.Expires == "" || l.IdleSeconds != int(loginIdle/time.Second) {
		t.Errorf("login answer %+v: want a 256-bit CSRF token, an expiry and the idle timeout", l)
	}
	if c.Name != loginCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("cookie %s: want %s, HttpOnly, SameSite=Strict, Path=/, not Secure without TLS", c.Raw, loginCookie)
	}
	if c.MaxAge != int(loginTTL/time.Second) {
		t.Errorf("cookie Max-Age=%d, want %d", c.MaxAge, int(loginTTL/time.Second))
	}
	if len(c.Value) != 43 || strings.Contains(c.Raw, s.cfg.HTTPReadToken) || strings.Contains(c.Raw, s.cfg.HTTPToken) || c.Value == l.CSRFToken {
		t.Errorf("cookie %s: want a random 256-bit id, neither a token nor the CSRF token", c.Raw)
	}
	// Reads with the cookie.
	var ss wire.Sessions
	if code, _ := b.do("GET", "/v1/sessions", "", &ss); code != http.StatusOK || len(ss.Sessions) != 1 {
		t.Fatalf("GET /v1/sessions with the login: %d %+v", code, ss)
	}
	var again loginJSON
	if code, h := b.do("GET", "/v1/login", "", &again); code != http.StatusOK || again.CSRFToken != l.CSRFToken || again.Right != "read" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /v1/login: %d %+v %v, want the same login, not cached", code, again, h)
	}
	// A write, with every check of the page passed: the right is missing.
	var e wire.Error
	if code, _ := b.do("POST", "/v1/threads/th_login/pause", `{"actor":"`+actor+`"}`, &e); code != http.StatusForbidden || e.Rule != "needs the write right" {
		t.Fatalf("pause with a read login: %d %+v, want 403 needing the write right", code, e)
	}
	// Logout ends the login, on the server as in the browser.
	code, h := b.do("DELETE", "/v1/login", "", nil)
	if code != http.StatusNoContent {
		t.Fatalf("logout: %d", code)
	}
	if cs := (&http.Response{Header: h}).Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("logout cookies %v: want the cookie cleared", cs)
	}
	if code, _ := b.do("GET", "/v1/sessions", "", &e); code != http.StatusUnauthorized {
		t.Fatalf("GET with the cookie after logout: %d %+v, want 401", code, e)
	}
}

// TestLoginWrongToken: a wrong token is 401 and counted; past
// loginFailures of one token from one address within the window, that
// token is refused (429) until the window ends. Others' failures from
// the same address (every local user's is 127.0.0.1) never lock the
// right token out.
func TestLoginWrongToken(t *testing.T) {
	s := start(t, Config{})
	clock := useClock(s)
	b := newBrowser(t, http.DefaultClient, base(s))
	try := func(tok string) (int, http.Header, wire.Error) {
		var e wire.Error
		code, h := b.do("POST", "/v1/login", `{"token":"`+tok+`"}`, &e)
		return code, h, e
	}
	// Many wrong tokens, each failing less than the limit.
	for i, tok := range []string{"wrong", "", s.cfg.HTTPToken + "x", "a", "b", "c", "d", "e"} {
		if code, h, e := try(tok); code != http.StatusUnauthorized || e.Field != "token" || len(h.Values("Set-Cookie")) != 0 {
			t.Fatalf("login %d with %q: %d %+v, want 401 on token without a cookie", i, tok, code, e)
		}
	}
	// One wrong token, past the limit.
	for i := 0; i < loginFailures; i++ {
		if code, _, e := try("mallory"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d of one token: %d %+v, want 401", i, code, e)
		}
	}
	code, h, e := try("mallory")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || e.Field != "token" || !strings.Contains(e.Rule, "with one token") {
		t.Fatalf("login of a token after %d failures: %d %+v, want 429 with Retry-After", loginFailures, code, e)
	}
	// The right token, from the same address, is never locked out.
	if l, _ := b.login(s.cfg.HTTPToken); l.Right != "write" {
		t.Fatalf("the right token after others' failures: %+v", l)
	}
	metrics := scrape(t, s)
	for _, want := range []string{`spl_http_refused_total{reason="login_failed"} 13`, `spl_http_refused_total{reason="login_limited"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	clock.add(loginWindow)
	if code, _, e := try("mallory"); code != http.StatusUnauthorized {
		t.Fatalf("the limited token after the window: %d %+v, want 401 (checked again)", code, e)
	}
	// Not JSON (a form posted without the page's script): refused.
	b.cookie = nil
	if code, _ := b.do("POST", "/v1/login", "token="+s.cfg.HTTPToken, nil); code != http.StatusBadRequest {
		t.Fatalf("form-encoded login: %d, want 400", code)
	}
}

// scrape returns the server's metrics.
func scrape(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := authClient.Get(base(s) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// TestLoginCSRF: a write with the login cookie needs the CSRF token and
// the server's own origin; each missing one is 403 naming the rule. A
// bearer token needs neither.
func TestLoginCSRF(t *testing.T) {
	s := start(t, Config{})
	emitThread(t, s, "th_csrf")
	b := newBrowser(t, http.DefaultClient, base(s))
	b.login(s.cfg.HTTPToken)
	csrf := b.csrf
	pause := `{"actor":"` + actor + `"}`
	for _, c := range []struct {
		name, csrf, origin, site, field string
	}{
		{"no CSRF token", "", base(s), "same-origin", csrfHeader},
		{"another login's CSRF token", strings.Repeat("A", len(csrf)), base(s), "same-origin", csrfHeader},
		{"cross-site Origin", csrf, "http://evil.example", "cross-site", "Origin"},
		{"another port of the host (same site)", csrf, "http://127.0.0.1:1", "same-site", "Origin"},
		{"Origin of another port alone", csrf, "http://127.0.0.1:1", "", "Origin"},
		{"Origin null", csrf, "null", "", "Origin"},
		{"neither Origin nor Sec-Fetch-Site", csrf, "", "", "Origin"},
		{"a navigation's Sec-Fetch-Site none", csrf, "", "none", "Origin"},
	} {
		b.csrf, b.origin, b.site = c.csrf, c.origin, c.site
		var e wire.Error
		if code, _ := b.do("POST", "/v1/threads/th_csrf/pause", pause, &e); code != http.StatusForbidden || e.Field != c.field || e.Rule == "" {
			t.Errorf("%s: %d %+v, want 403 on %s naming the rule", c.name, code, e, c.field)
		}
	}
	// A read from another site with the cookie: refused too.
	b.csrf, b.origin, b.site = "", "http://127.0.0.1:1", "same-site"
	if code, _ := b.do("GET", "/v1/sessions", "", nil); code != http.StatusForbidden {
		t.Errorf("GET from another site with the cookie: %d, want 403", code)
	}
	// What the page sends: allowed.
	b.csrf, b.origin, b.site = csrf, base(s), "same-origin"
	var p wire.Paused
	if code, _ := b.do("POST", "/v1/threads/th_csrf/pause", pause, &p); code != http.StatusCreated {
		t.Fatalf("pause with the cookie, CSRF token and origin: %d, want 201", code)
	}
	// A bearer token from anywhere needs neither.
	req, _ := http.NewRequest("POST", base(s)+"/v1/threads/th_csrf/resume", strings.NewReader(`{"actor":"`+actor+`"}`))
	req.Header.Set("Origin", "http://evil.example")
	if code, _ := callReq(t, http.DefaultClient, req, nil); code != http.StatusOK {
		t.Fatalf("resume with the bearer token: %d, want 200", code)
	}
	if m := scrape(t, s); !strings.Contains(m, `spl_http_refused_total{reason="csrf"} 9`) {
		t.Errorf("metrics do not count 9 csrf refusals:\n%s", grepLines(m, "refused"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLoginExpiry: a login ends loginIdle after its last use, and
// loginTTL after it began however used.
func TestLoginExpiry(t *testing.T) {
	s := start(t, Config{})
	clock := useClock(s)
	b := newBrowser(t, http.DefaultClient, base(s))
	b.login(s.cfg.HTTPReadToken)
	clock.add(loginIdle - time.Minute)
	if code, _ := b.do("GET", "/v1/login", "", nil); code != http.StatusOK {
		t.Fatalf("used before the idle timeout: %d, want 200", code)
	}
	clock.add(loginIdle)
	var e wire.Error
	code, h := b.do("GET", "/v1/login", "", &e)
	if code != http.StatusUnauthorized {
		t.Fatalf("idle past the timeout: %d %+v, want 401", code, e)
	}
	if cs := (&http.Response{Header: h}).Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("401 of an ended login: cookies %v, want it cleared", cs)
	}
	b.login(s.cfg.HTTPReadToken)
	step := loginIdle / 2
	for at := step; at < loginTTL; at += step {
		clock.add(step)
		if code, _ := b.do("GET", "/v1/login", "", nil); code != http.StatusOK {
			t.Fatalf("used every %s, at %s: %d, want 200", step, at, code)
		}
	}
	clock.add(step)
	if code, _ := b.do("GET", "/v1/login", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("used all along, past %s: %d, want 401", loginTTL, code)
	}
}

// TestLoginTLS: under TLS the cookie is Secure and a __Host- cookie; a
// write with a client certificate from another origin is refused, as a
// cookie's is.
func TestLoginTLS(t *testing.T) {
	s, dir, pool := startTLS(t)
	u := "https://" + s.HTTPAddr()
	b := newBrowser(t, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, u)
	_, c := b.login(s.cfg.HTTPReadToken)
	if c.Name != loginCookieTLS || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie under TLS %s: want %s, Secure, HttpOnly, SameSite=Strict, Path=/", c.Raw, loginCookieTLS)
	}
	if code, _ := b.do("GET", "/v1/sessions", "", nil); code != http.StatusOK {
		t.Fatalf("GET with the login under TLS: %d", code)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := newBrowser(t, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}, u)
	post := emitBody("th", "DO", "agent.step", `{"n":1}`)
	withCert.origin, withCert.site = "https://evil.example", "cross-site"
	if code, _ := withCert.do("POST", "/v1/records", post, nil); code != http.StatusForbidden {
		t.Fatalf("write with a client certificate from another origin: %d, want 403", code)
	}
	withCert.origin, withCert.site = "", ""
	if code, _ := withCert.do("POST", "/v1/records", post, nil); code != http.StatusCreated {
		t.Fatalf("write with a client certificate from a program: %d, want 201", code)
	}
}

// TestNoQueryToken: a token in the query string authenticates nothing.
func TestNoQueryToken(t *testing.T) {
	s := start(t, Config{})
	b := newBrowser(t, http.DefaultClient, base(s))
	b.origin, b.site = "", ""
	for _, q := range []string{"token", "access_token", "auth", "bearer", "csrf_token", "spl_login"} {
		for _, path := range []string{"/v1/threads?", "/v1/threads/th/events?", "/v1/login?"} {
			if code, _ := b.do("GET", path+q+"="+s.cfg.HTTPToken, "", nil); code != http.StatusUnauthorized {
				t.Errorf("GET %s%s=<write token>: %d, want 401", path, q, code)
			}
		}
	}
}

// TestPage: the page needs no credentials, runs no inline script, may
// not be framed, and never hands record data to the HTML parser.
func TestPage(t *testing.T) {
	s := start(t, Config{})
	b := newBrowser(t, http.DefaultClient, base(s))
	b.origin, b.site = "", ""
	files := map[string]string{"/": "text/html", "/page.js": "text/javascript", "/page.css": "text/css"}
	for path, ct := range files {
		code, h := b.do("GET", path, "", nil)
		csp := h.Get("Content-Security-Policy")
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %s, want 200 %s", path, code, h.Get("Content-Type"), ct)
		}
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: CSP %q, X-Frame-Options %q, X-Content-Type-Options %q", path, csp, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
		}
	}
	html, _ := pageFiles.ReadFile("page/index.html")
	js, _ := pageFiles.ReadFile("page/page.js")
	if m := regexp.MustCompile(`<script(\s[^>]*)?>\s*[^<\s]|\son[a-z]+=|javascript:`).Find(html); m != nil {
		t.Errorf("index.html has inline script: %s", m)
	}
	if !regexp.MustCompile(`<form id="login-form" method="post"`).Match(html) {
		t.Errorf("the login form does not post: without its script it would put the token in the URL")
	}
	if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).Find(js); m != nil {
		t.Errorf("page.js hands text to the HTML parser or evaluates it: %s", m)
	}
	// A path that is not the page still needs credentials.
	if code, _ := b.do("GET", "/index.html", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /index.html: %d, want 401", code)
	}
}

// TestLoginInsecure: without authentication the page needs no login.
func TestLoginInsecure(t *testing.T) {
	s := start(t, Config{InsecureNoAuth: true})
	b := newBrowser(t, http.DefaultClient, base(s))
	var l loginJSON
	if code, _ := b.do("GET", "/v1/login", "", &l); code != http.StatusOK || l.Right != "write" || len(l.Warnings) == 0 {
		t.Fatalf("GET /v1/login without authentication: %d %+v, want the write right and the warning", code, l)
	}
}

// TestLoginStoreBound: the logins held are bounded; the least recently
// used goes first.
func TestLoginStoreBound(t *testing.T) {
	ls := newLoginStore()
	first, _ := ls.begin(rightRead)
	second, _ := ls.begin(rightRead)
	for range maxLogins {
		if _, ok := ls.use(second); !ok {
			t.Fatal("second login gone")
		}
		ls.begin(rightWrite)
	}
	if got := len(ls.ids); got != maxLogins {
		t.Fatalf("logins held: %d, want %d", got, maxLogins)
	}
	if _, ok := ls.use(first); ok {
		t.Fatal("the least recently used login was kept")
	}
	for range maxRemotes + 10 {
		ls.failed(randomText(8))
	}
	if got := len(ls.fails); got != maxRemotes {
		t.Fatalf("addresses counted: %d, want %d", got, maxRemotes)
	}
}

// TestLogoutEndsTail: a live tail opened with the login cookie ends at
// the next heartbeat once its login is logged out elsewhere (another tab,
// or the login's end), instead of flowing until it reconnects.
func TestLogoutEndsTail(t *testing.T) {
	s := start(t, Config{Heartbeat: 100 * time.Millisecond})
	emitThread(t, s, "th_tail_logout")
	b := newBrowser(t, http.DefaultClient, base(s))
	_, c := b.login(s.cfg.HTTPReadToken)
	req, err := http.NewRequest("GET", base(s)+"/v1/threads/th_tail_logout/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(c)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tail with the login: %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("the tail ended before logout: %v", err)
	case <-time.After(300 * time.Millisecond): // heartbeats flow
	}
	if code, _ := b.do("DELETE", "/v1/login", "", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d", code)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the tail still flows 5s after logout")
	}
}
