package serve

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/wire"
)

// Authentication, by default wherever the server listens.
//
// Unless configured with credentials of its own, or with
// Config.InsecureNoAuth, the server requires the data directory's
// secrets, created on its first start (mode 0600 in a directory only its
// owner can change, see natsio.CheckDir):
//
//	Dir/token       NATS clients (token auth), and HTTP clients that write
//	                (with Config.Token set, that token is the HTTP one too)
//	Dir/read-token  HTTP and NATS clients that only read (GET)
//	Dir/admin-token everything, and actor key bindings too (natsauth.go)
//
// The NATS token is the one the embedded log of the directory uses, so
// spl commands run on the directory without --server still join the
// server. Over HTTP a request sends `Authorization: Bearer <token>`, or,
// with Config.HTTPClientCA, a client certificate (the write right), or
// the cookie of a login (login.go). A request without valid credentials
// is answered 401; a read credential on a request that is not GET or
// HEAD, 403 naming the missing right. /healthz answers everyone: it
// carries no record, and a load balancer must reach it; so do the
// reviewer's page (page.go: static files, no record) and POST /v1/login.
//
// The reviewer's page logs in once per browser: the token pasted into
// it is exchanged for a login whose id, random, is the cookie (HttpOnly,
// SameSite=Strict), with the right of the token; the token never leaves
// the request that checks it. The browser sends that cookie on its own,
// so a request that carries it must show it comes from the page: from
// this server's origin, and, unless it only reads, with the login's CSRF
// token (login.go says how). A client certificate is as ambient: a write
// it authenticates must not come from another origin either. Bearer
// tokens are sent by the programs that hold them, so neither check
// applies. No token is ever taken from a query string: it would end up
// in proxy logs and browser history (an EventSource, which cannot send
// a header, sends the cookie).

// ReadTokenFile is the name of the read token in the data directory.
const ReadTokenFile = "read-token"

// insecureWarning is what the log and /healthz say of InsecureNoAuth.
const insecureWarning = "authentication is off (--insecure-no-auth): anyone who can reach this server can read, write and erase records; use it on a trusted test network only"

// right is what a credential allows.
type right int

const (
	rightNone right = iota
	rightRead
	rightWrite
	rightAdmin // writes actor key bindings too (natsauth.go)
)

func (r right) String() string {
	switch r {
	case rightRead:
		return "read"
	case rightWrite:
		return "write"
	case rightAdmin:
		return "admin"
	}
	return "none"
}

// credentials fills in the credentials the config leaves to the data
// directory, creating them on the first start, and tells the operator
// where they are when it created any. It runs once the directory is
// locked (and so checked).
func (s *Server) credentials() error {
	if s.cfg.InsecureNoAuth {
		s.logger.Warn(insecureWarning)
		return nil
	}
	var created []string
	secret := func(name string) (string, error) {
		tok, made, err := natsio.Secret(s.cfg.Dir, name)
		if err != nil {
			return "", fmt.Errorf("credentials: %w", err)
		}
		if made {
			created = append(created, filepath.Join(s.cfg.Dir, name))
		}
		return tok, nil
	}
	if !s.natsAuthConfigured() {
		tok, err := secret(natsio.TokenFile)
		if err != nil {
			return err
		}
		s.cfg.Token, s.dirToken = tok, true
		if s.nopts, s.own, err = s.cfg.natsOptions(); err != nil {
			return err
		}
	}
	if s.cfg.HTTPToken == "" && s.cfg.Token != "" {
		s.cfg.HTTPToken = s.cfg.Token // one secret for writers, NATS or HTTP
	}
	if s.cfg.HTTPToken == "" {
		tok, err := secret(natsio.TokenFile)
		if err != nil {
			return err
		}
		s.cfg.HTTPToken = tok
	}
	if s.cfg.HTTPReadToken == "" {
		tok, err := secret(ReadTokenFile)
		if err != nil {
			return err
		}
		s.cfg.HTTPReadToken = tok
	}
	if err := s.natsRights(secret); err != nil { // see natsauth.go
		return err
	}
	s.created = created
	if len(created) > 0 {
		tokenFile := filepath.Join(s.cfg.Dir, natsio.TokenFile)
		readFile := filepath.Join(s.cfg.Dir, ReadTokenFile)
		s.logger.Info("credentials created (mode 0600; the log does not print them: read them from the files)",
			"created", strings.Join(created, ", "),
			"nats_clients", "spl --server nats://HOST:PORT --token-file "+tokenFile+" ... (or SPL_TOKEN_FILE="+tokenFile+")",
			"http_write", `curl -H "Authorization: Bearer $(cat `+tokenFile+`)" ...`,
			"http_read", `curl -H "Authorization: Bearer $(cat `+readFile+`)" ... (GET only; the reviewer's page takes it too)`,
			"admin", "SPL_TOKEN_FILE="+filepath.Join(s.cfg.Dir, AdminTokenFile)+" spl --server nats://HOST:PORT actor bind ...")
	}
	return nil
}

// CreatedCredentials returns the paths of the secrets this start created
// in the data directory (none when they existed already): what a
// terminal may be shown once (spl serve prints them to a terminal, never
// to a log).
func (s *Server) CreatedCredentials() []string { return slices.Clone(s.created) }

// natsAuthConfigured reports whether the NATS listener has credentials of
// the config's own: flags, or a nats-server configuration file.
func (s *Server) natsAuthConfigured() bool {
	o := s.nopts
	return s.cfg.Token != "" || s.cfg.User != "" || len(s.cfg.NKeys) > 0 ||
		o.Authorization != "" || o.Username != "" || len(o.Users) > 0 || len(o.Nkeys) > 0 ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.AuthCallout != nil
}

// authorize answers 401 or 403 for a request whose credentials do not
// allow it, and passes the others to next, with their credential in the
// request's context (credentialOf). The page, /healthz and POST
// /v1/login need none. Every answer says that it is not to be framed or
// sniffed.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		secureHeaders(h)
		if s.cfg.InsecureNoAuth || public(r) {
			next.ServeHTTP(w, r)
			return
		}
		c, via := s.credential(r)
		need := needed(r)
		safe := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case c.right == rightNone:
			s.m.refused.WithLabelValues("unauthorized").Inc()
			s.logger.Warn("http refused: no valid credentials", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			if via == viaCookie {
				s.setLoginCookie(w, "") // a login that ended: the browser forgets it
			}
			h.Set("WWW-Authenticate", `Bearer realm="spl"`)
			writeJSON(w, http.StatusUnauthorized, wire.Error{
				Error: "authentication required: send Authorization: Bearer <token> (spl serve's token files, or the tokens it was configured with), or log in on the page (POST /v1/login)",
				Field: "Authorization", Rule: "a valid bearer token, client certificate or login"})
			return
		case via == viaCookie:
			// The browser sends the cookie whoever asks it to: the
			// request must show that this server's page did.
			if err := sameOrigin(r, !safe); err != nil {
				s.refuseOrigin(w, r, err)
				return
			}
			if !safe && subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(c.login.csrf)) != 1 {
				s.m.refused.WithLabelValues("csrf").Inc()
				s.logger.Warn("http refused: no valid CSRF token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				writeJSON(w, http.StatusForbidden, wire.Error{
					Error: fmt.Sprintf("forbidden: %s %s with the login cookie needs the login's CSRF token in %s", r.Method, r.URL.Path, csrfHeader),
					Field: csrfHeader, Rule: "a write with the login cookie carries the login's CSRF token (GET /v1/login)"})
				return
			}
		case via == viaCertificate && !safe:
			// A browser sends a client certificate whoever asks it to.
			if err := sameOrigin(r, false); err != nil {
				s.refuseOrigin(w, r, err)
				return
			}
		}
		if c.right < need {
			s.m.refused.WithLabelValues("forbidden").Inc()
			s.logger.Warn("http refused: missing right", "method", r.Method, "path", r.URL.Path, "have", c.right, "need", need, "remote", r.RemoteAddr)
			writeJSON(w, http.StatusForbidden, wire.Error{
				Error: fmt.Sprintf("forbidden: %s %s needs the %s right; this credential has the %s right only", r.Method, r.URL.Path, need, c.right),
				Field: "Authorization", Rule: "needs the " + need.String() + " right"})
			return
		}
		next.ServeHTTP(w, r.WithContext(asAdmin(context.WithValue(r.Context(), credentialKey{}, c), c.right)))
	})
}

// secureHeaders says, in h, that an answer is not to be framed or
// sniffed.
func secureHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'") // the page sets its own
}

// How a request authenticated.
const (
	viaNone        = ""
	viaCertificate = "certificate"
	viaToken       = "token"
	viaCookie      = "cookie"
)

// credential finds the credential of r: a verified client certificate,
// else an Authorization header (only it, right or wrong), else the login
// cookie. No token is taken from the query string: it would end up in
// proxy logs and browser history.
func (s *Server) credential(r *http.Request) (credential, string) {
	switch {
	case r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		return credential{right: rightWrite}, viaCertificate
	case r.Header.Get("Authorization") != "":
		tok, _ := bearer(r)
		return credential{right: s.tokenRight(tok)}, viaToken
	}
	if id := s.loginCookieID(r); id != "" {
		l, ok := s.logins.use(id)
		if !ok {
			return credential{}, viaCookie
		}
		return credential{right: l.right, login: &l, id: id}, viaCookie
	}
	return credential{}, viaNone
}

// tokenRight is the right of a token over HTTP (rightOf).
func (s *Server) tokenRight(tok string) right {
	return rightOf(tok, s.adminToken, s.cfg.HTTPToken, s.cfg.HTTPReadToken)
}

// rightOf is the right tok gives, on HTTP as on NATS: the admin, write or
// read token's, every one compared in constant time whichever matches.
// An empty token, or one of the three left empty, matches nothing.
func rightOf(tok, admin, write, read string) right {
	is := func(secret string) bool {
		return tok != "" && secret != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(secret)) == 1
	}
	isAdmin, isWrite, isRead := is(admin), is(write), is(read)
	switch {
	case isAdmin:
		return rightAdmin
	case isWrite:
		return rightWrite
	case isRead:
		return rightRead
	}
	return rightNone
}

// needed is the right a request needs: read for GET and HEAD, and to end
// one's own login; write for the rest.
func needed(r *http.Request) right {
	if r.URL.Path == mcpPath {
		return rightRead // the tools of the session are the credential's (mcp.go)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete && r.URL.Path == "/v1/login" {
		return rightRead
	}
	return rightWrite
}

// public reports whether r needs no credentials: /healthz (it carries no
// record, and a load balancer must reach it), the page (it carries none
// either: it asks the API once logged in), and POST /v1/login, which
// checks a token itself.
func public(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/healthz":
		return true
	case p == "/v1/login":
		return r.Method == http.MethodPost
	default:
		return isPagePath(p)
	}
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// httpTLS wraps ln in TLS when the config has a certificate, verifying
// client certificates against HTTPClientCA when given.
func (c Config) httpTLS(ln net.Listener) (net.Listener, error) {
	if c.HTTPTLSCert == "" {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(c.HTTPTLSCert, c.HTTPTLSKey)
	if err != nil {
		return nil, fmt.Errorf("http tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.HTTPClientCA != "" {
		pem, err := os.ReadFile(c.HTTPClientCA)
		if err != nil {
			return nil, fmt.Errorf("http client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("http client ca %s: no PEM certificate in it", c.HTTPClientCA)
		}
		// A certificate is one credential; a token is another.
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tls.NewListener(ln, tc), nil
}

// warnings are what /healthz tells whoever asks about the server's
// configuration.
func (s *Server) warnings() []string {
	if s.cfg.InsecureNoAuth {
		return []string{insecureWarning}
	}
	return nil
}
