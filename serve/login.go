package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/spl-dev/spl/wire"
)

// Logins: how a browser authenticates, once, for the reviewer's page.
//
// POST /v1/login exchanges a token (the read token or the write token)
// for a login: a random 256-bit id in a cookie (HttpOnly, SameSite=Strict,
// Path=/, Secure under TLS), kept in memory with the token's right, its
// end (loginTTL after it began, or loginIdle after its last use, whichever
// comes first) and a CSRF token. The cookie holds the id only, never the
// token. authorize accepts the cookie as a credential with that right.
// GET /v1/login answers the login's right and CSRF token (a page reloaded
// learns them again); DELETE /v1/login ends it.
//
// A request authenticated by the cookie is one a browser sent on its own,
// so it must show that the page sent it: one that is not GET or HEAD
// carries the login's CSRF token in X-CSRF-Token and comes from the
// server's own origin (Origin, Sec-Fetch-Site); any request sent from
// another site (Sec-Fetch-Site same-site or cross-site: another port of
// the same host is the same site, so SameSite alone lets its requests
// carry the cookie) is refused. Bearer tokens are not ambient, so
// requests that carry one need neither.
//
// Failed logins are logged, counted (spl_http_refused_total{reason=
// "login_failed"}) and limited per token tried: loginFailures per
// loginWindow of one token from one remote address, then that token is
// answered 429 from there until the window ends. The limit is on the
// token tried, not on the address, so that nobody who shares an address
// (every local user shares 127.0.0.1) can lock the right token out by
// failing on purpose: the right token is never refused for others'
// failures. Guessing is not what the limit stops; the tokens' length does
// (256 random bits when the server makes them, at least 16 characters
// when configured). It keeps a client that retries a wrong token cheap
// and visible.

const (
	loginCookie    = "spl_login"
	loginCookieTLS = "__Host-spl_login" // the browser keeps it for this origin only, Secure
	csrfHeader     = "X-CSRF-Token"

	loginTTL      = 12 * time.Hour // a login ends this long after it began
	loginIdle     = time.Hour      // or this long after its last use
	maxLogins     = 1024           // logins kept at once; past it the least recently used ends
	loginFailures = 5              // failed logins of one token from one remote address per loginWindow
	loginWindow   = time.Minute
	maxRemotes    = 4096 // (address, token) pairs whose failures are counted at once
	maxLoginBody  = 4 << 10
)

// login is one browser's login.
type login struct {
	right   right
	csrf    string
	started time.Time
	used    time.Time
}

// end is when l ends unless used again.
func (l *login) end() time.Time {
	return minTime(l.started.Add(loginTTL), l.used.Add(loginIdle))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// failures counts the failed logins of one remote address since a time.
type failures struct {
	n     int
	since time.Time
}

// loginStore holds the logins in memory, by the SHA-256 of their ids (a
// lookup's timing then says nothing of the ids held), and the failed
// logins of each remote address. A restart ends every login.
type loginStore struct {
	mu    sync.Mutex
	clock func() time.Time
	ids   map[[sha256.Size]byte]*login
	fails map[string]*failures
}

func newLoginStore() *loginStore {
	return &loginStore{clock: time.Now, ids: make(map[[sha256.Size]byte]*login), fails: make(map[string]*failures)}
}

// randomText is n random bytes, base64url.
func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// begin starts a login with right r and returns its id.
func (ls *loginStore) begin(r right) (string, login) {
	id := randomText(32)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := ls.clock()
	if len(ls.ids) >= maxLogins {
		ls.evict(now)
	}
	l := &login{right: r, csrf: randomText(32), started: now, used: now}
	ls.ids[sha256.Sum256([]byte(id))] = l
	return id, *l
}

// evict drops the logins that ended and, if none did, the least recently
// used one. ls.mu is held.
func (ls *loginStore) evict(now time.Time) {
	var oldest [sha256.Size]byte
	var oldestUse time.Time
	dropped := false
	for k, l := range ls.ids {
		if !now.Before(l.end()) {
			delete(ls.ids, k)
			dropped = true
		} else if oldestUse.IsZero() || l.used.Before(oldestUse) {
			oldest, oldestUse = k, l.used
		}
	}
	if !dropped && !oldestUse.IsZero() {
		delete(ls.ids, oldest)
	}
}

// use returns the login of id, marking it used now; false when there is
// none, or it ended (and is dropped).
func (ls *loginStore) use(id string) (login, bool) {
	k := sha256.Sum256([]byte(id))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.ids[k]
	if !ok {
		return login{}, false
	}
	now := ls.clock()
	if !now.Before(l.end()) {
		delete(ls.ids, k)
		return login{}, false
	}
	l.used = now
	return *l, true
}

// alive reports whether the login of id has not ended, without marking
// it used: a live tail asks at each heartbeat.
func (ls *loginStore) alive(id string) bool {
	k := sha256.Sum256([]byte(id))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.ids[k]
	return ok && ls.clock().Before(l.end())
}

// end ends the login of id.
func (ls *loginStore) end(id string) {
	k := sha256.Sum256([]byte(id))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.ids, k)
}

// limited reports whether the token of key (failureKey) has failed
// loginFailures times from its address within the current window, and
// when it may be tried again.
func (ls *loginStore) limited(key string) (time.Duration, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	f, ok := ls.fails[key]
	if !ok {
		return 0, false
	}
	left := f.since.Add(loginWindow).Sub(ls.clock())
	if left <= 0 {
		delete(ls.fails, key)
		return 0, false
	}
	return left, f.n >= loginFailures
}

// failed counts a failed login of key (failureKey).
func (ls *loginStore) failed(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := ls.clock()
	f, ok := ls.fails[key]
	if ok && now.Sub(f.since) >= loginWindow {
		f.n, f.since = 0, now
	}
	if !ok {
		if len(ls.fails) >= maxRemotes {
			ls.forgetFailures(now)
		}
		f = &failures{since: now}
		ls.fails[key] = f
	}
	f.n++
}

// forgetFailures drops the counts whose window passed and, if none did,
// the oldest. ls.mu is held.
func (ls *loginStore) forgetFailures(now time.Time) {
	oldest, oldestSince, dropped := "", time.Time{}, false
	for k, f := range ls.fails {
		if now.Sub(f.since) >= loginWindow {
			delete(ls.fails, k)
			dropped = true
		} else if oldestSince.IsZero() || f.since.Before(oldestSince) {
			oldest, oldestSince = k, f.since
		}
	}
	if !dropped && oldest != "" {
		delete(ls.fails, oldest)
	}
}

// loginRoutes adds the routes of logins.
func (s *Server) loginRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/login", s.handleLogin)
	mux.HandleFunc("GET /v1/login", s.handleLoginState)
	mux.HandleFunc("DELETE /v1/login", s.handleLogout)
}

// loginRequest is the body of POST /v1/login.
type loginRequest struct {
	Token string `json:"token"`
}

// loginJSON is the answer of POST and GET /v1/login.
type loginJSON struct {
	Right       string   `json:"right"`      // read or write
	CSRFToken   string   `json:"csrf_token"` // X-CSRF-Token of the login's writes; "" without a login
	Expires     string   `json:"expires"`    // RFC 3339, UTC: the login ends then at the latest; "" without a login
	IdleSeconds int      `json:"idle_seconds"`
	Warnings    []string `json:"warnings,omitempty"` // authentication off
}

func newLoginJSON(l login) loginJSON {
	return loginJSON{Right: l.right.String(), CSRFToken: l.csrf,
		Expires: l.started.Add(loginTTL).UTC().Format(time.RFC3339), IdleSeconds: int(loginIdle / time.Second)}
}

// cookieName is the name of the login cookie: with TLS, a __Host- cookie.
func (s *Server) cookieName() string {
	if s.cfg.HTTPTLSCert != "" {
		return loginCookieTLS
	}
	return loginCookie
}

// setLoginCookie sets the cookie of login id; "" clears it.
func (s *Server) setLoginCookie(w http.ResponseWriter, id string) {
	c := &http.Cookie{Name: s.cookieName(), Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.cfg.HTTPTLSCert != "", MaxAge: int(loginTTL / time.Second)}
	if id == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// loginCookieID is the login id of the request's cookie, "" when none.
func (s *Server) loginCookieID(r *http.Request) string {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return ""
	}
	return c.Value
}

// failureKey is what failed logins are counted by: the address and a
// digest of the token tried (never the token itself, kept in memory for
// a minute).
func failureKey(remote, token string) string {
	d := sha256.Sum256([]byte(token))
	return remote + " " + hex.EncodeToString(d[:16])
}

// remoteHost is the address a request came from, without its port: the
// unit of the failed-login limit.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// handleLogin exchanges a token for a login. It needs no credentials: it
// checks one. Its Origin is checked as a write's is (sameOrigin).
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.cfg.InsecureNoAuth {
		writeJSON(w, http.StatusOK, loginJSON{Right: rightWrite.String(), Warnings: s.warnings()})
		return
	}
	if err := sameOrigin(r, false); err != nil {
		s.refuseOrigin(w, r, err)
		return
	}
	var req loginRequest
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if !s.readRequest(w, r, &req) {
		return
	}
	remote := remoteHost(r)
	tried := failureKey(remote, req.Token)
	if wait, ok := s.logins.limited(tried); ok {
		s.m.refused.WithLabelValues("login_limited").Inc()
		s.logger.Warn("http refused: login limited", "remote", r.RemoteAddr, "retry_after", wait.Round(time.Second))
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		writeJSON(w, http.StatusTooManyRequests, wire.Error{
			Error: fmt.Sprintf("this token failed %d logins from %s; try it again in %s", loginFailures, remote, wait.Round(time.Second)),
			Field: "token", Rule: fmt.Sprintf("at most %d failed logins a %s with one token from one address", loginFailures, loginWindow)})
		return
	}
	have := s.tokenRight(req.Token)
	if have == rightNone {
		s.logins.failed(tried)
		s.m.refused.WithLabelValues("login_failed").Inc()
		s.logger.Warn("http refused: login with a wrong token", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, wire.Error{Error: "login: the token is neither the read token nor the write token",
			Field: "token", Rule: "the read token (DIR/read-token) or the write token (DIR/token)"})
		return
	}
	if old := s.loginCookieID(r); old != "" {
		s.logins.end(old) // a new id for every login: none fixed in advance
	}
	id, l := s.logins.begin(have)
	s.setLoginCookie(w, id)
	s.logger.Info("login", "right", have, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, newLoginJSON(l))
}

// handleLoginState answers the request's login: its right and CSRF
// token. A request authenticated otherwise gets its right alone.
func (s *Server) handleLoginState(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	c := credentialOf(r.Context())
	if s.cfg.InsecureNoAuth {
		writeJSON(w, http.StatusOK, loginJSON{Right: rightWrite.String(), Warnings: s.warnings()})
		return
	}
	if c.login == nil {
		writeJSON(w, http.StatusOK, loginJSON{Right: c.right.String()})
		return
	}
	writeJSON(w, http.StatusOK, newLoginJSON(*c.login))
}

// handleLogout ends the request's login and clears its cookie.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c := credentialOf(r.Context()); c.id != "" {
		s.logins.end(c.id)
	}
	s.setLoginCookie(w, "")
	w.WriteHeader(http.StatusNoContent)
}

// errCrossOrigin is the class of the refusals of sameOrigin.
var errCrossOrigin = errors.New("spl/serve: not sent by a page of this server")

// sameOrigin checks that a browser sent r from a page of this server's
// origin: Sec-Fetch-Site, when sent, must be same-origin (or none, the
// user's own navigation, for GET and HEAD), and Origin, when sent, this
// server's scheme://host. With evidence, a request that carries neither
// is refused too (every browser sends Origin on a request that is not GET
// or HEAD); without, it passes (a program, not a browser).
//
// http.CrossOriginProtection checks the same headers, but lets through
// a write that carries neither, which for the login cookie is not enough.
func sameOrigin(r *http.Request, evidence bool) error {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if site != "" && site != "same-origin" && (site != "none" || !safe) {
		return fmt.Errorf("%w: Sec-Fetch-Site is %s", errCrossOrigin, site)
	}
	if origin != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		u, err := url.Parse(origin)
		if err != nil || u.Scheme != scheme || u.Host != r.Host {
			return fmt.Errorf("%w: Origin %s is not %s://%s", errCrossOrigin, origin, scheme, r.Host)
		}
	}
	if evidence && site == "" && origin == "" {
		return fmt.Errorf("%w: neither Origin nor Sec-Fetch-Site was sent", errCrossOrigin)
	}
	return nil
}

// refuseOrigin answers 403 to a request sameOrigin refused.
func (s *Server) refuseOrigin(w http.ResponseWriter, r *http.Request, err error) {
	s.m.refused.WithLabelValues("csrf").Inc()
	s.logger.Warn("http refused: cross-origin", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	writeJSON(w, http.StatusForbidden, wire.Error{Error: "forbidden: " + err.Error(), Field: "Origin",
		Rule: "a request with the login cookie comes from this server's own origin"})
}

// credential is what authenticated a request.
type credential struct {
	right right
	login *login // the login of the cookie, when it was the credential
	id    string // the cookie's login id, then
}

type credentialKey struct{}

// credentialOf is the credential authorize found for a request.
func credentialOf(ctx context.Context) credential {
	c, _ := ctx.Value(credentialKey{}).(credential)
	return c
}
