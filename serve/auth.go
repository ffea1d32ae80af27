package serve

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
// with Config.HTTPClientCA, a client certificate (the write right). A
// request without valid credentials is answered 401; a read credential
// on a request that is not GET or HEAD, 403 naming the missing right.
// /healthz answers everyone: it carries no record, and a load balancer
// must reach it.
//
// A reviewer's web page (a session cookie exchanged for the read token,
// and SSE from a browser, whose EventSource cannot send a header) is
// later work: a token in a query string would end up in proxy logs, so
// none is accepted.

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
	if len(created) > 0 {
		tokenFile := filepath.Join(s.cfg.Dir, natsio.TokenFile)
		readFile := filepath.Join(s.cfg.Dir, ReadTokenFile)
		s.logger.Info("credentials created (mode 0600; they are not printed: read them from the files)",
			"created", strings.Join(created, ", "),
			"nats_clients", "spl --server nats://HOST:PORT --token-file "+tokenFile+" ... (or SPL_TOKEN_FILE="+tokenFile+")",
			"http_write", `curl -H "Authorization: Bearer $(cat `+tokenFile+`)" ...`,
			"http_read", `curl -H "Authorization: Bearer $(cat `+readFile+`)" ... (GET only)`)
	}
	return nil
}

// natsAuthConfigured reports whether the NATS listener has credentials of
// the config's own: flags, or a nats-server configuration file.
func (s *Server) natsAuthConfigured() bool {
	o := s.nopts
	return s.cfg.Token != "" || s.cfg.User != "" || len(s.cfg.NKeys) > 0 ||
		o.Authorization != "" || o.Username != "" || len(o.Users) > 0 || len(o.Nkeys) > 0 ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.AuthCallout != nil
}

// authorize answers 401 or 403 for a request whose credentials do not
// allow it, and passes the others to next.
func (s *Server) authorize(next http.Handler) http.Handler {
	if s.cfg.InsecureNoAuth {
		return next
	}
	write, read, admin := []byte(s.cfg.HTTPToken), []byte(s.cfg.HTTPReadToken), []byte(s.adminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		have := rightNone
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			have = rightWrite
		} else if tok, ok := bearer(r); ok {
			// Both compared, in constant time, whichever matches.
			isWrite := subtle.ConstantTimeCompare([]byte(tok), write) == 1
			isRead := subtle.ConstantTimeCompare([]byte(tok), read) == 1
			isAdmin := len(admin) > 0 && subtle.ConstantTimeCompare([]byte(tok), admin) == 1
			switch {
			case isAdmin:
				have = rightAdmin
			case isWrite:
				have = rightWrite
			case isRead:
				have = rightRead
			}
		}
		need := rightWrite
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			need = rightRead
		}
		switch {
		case have == rightNone:
			s.m.refused.WithLabelValues("unauthorized").Inc()
			s.logger.Warn("http refused: no valid credentials", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="spl"`)
			writeJSON(w, http.StatusUnauthorized, wire.Error{
				Error: "authentication required: send Authorization: Bearer <token> (spl serve's token files, or the tokens it was configured with)",
				Field: "Authorization", Rule: "a valid bearer token or client certificate"})
		case have < need:
			s.m.refused.WithLabelValues("forbidden").Inc()
			s.logger.Warn("http refused: missing right", "method", r.Method, "path", r.URL.Path, "have", have, "need", need, "remote", r.RemoteAddr)
			writeJSON(w, http.StatusForbidden, wire.Error{
				Error: fmt.Sprintf("forbidden: %s %s needs the %s right; this credential has the %s right only", r.Method, r.URL.Path, need, have),
				Field: "Authorization", Rule: "needs the " + need.String() + " right"})
		default:
			next.ServeHTTP(w, r.WithContext(asAdmin(r.Context(), have)))
		}
	})
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
