package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// testTokens maps the HTTP address of each server the tests started to
// its write token, so that requests carry real credentials.
var testTokens sync.Map

// authorize adds the write token of the server req goes to, unless req
// has an Authorization header already.
func authorize(req *http.Request) {
	if req.Header.Get("Authorization") != "" {
		return
	}
	if tok, ok := testTokens.Load(req.URL.Host); ok {
		req.Header.Set("Authorization", "Bearer "+tok.(string))
	}
}

type authTransport struct{ next http.RoundTripper }

func (a authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	authorize(req)
	return a.next.RoundTrip(req)
}

// authClient is http.DefaultClient with the servers' write tokens.
var authClient = &http.Client{Transport: authTransport{http.DefaultTransport}}

func TestHTTPAuth(t *testing.T) {
	s := start(t, Config{})
	post := emitBody("th", "DO", "agent.step", `{"n":1}`)
	for _, c := range []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"no token", "GET", "/v1/threads/th/records", "none", "", http.StatusUnauthorized},
		{"no token post", "POST", "/v1/records", "none", post, http.StatusUnauthorized},
		{"wrong token", "GET", "/v1/threads", "0123456789abcdef0123", "", http.StatusUnauthorized},
		{"metrics without token", "GET", "/metrics", "none", "", http.StatusUnauthorized},
		{"unknown route without token", "GET", "/nowhere", "none", "", http.StatusUnauthorized},
		{"read token post", "POST", "/v1/records", s.cfg.HTTPReadToken, post, http.StatusForbidden},
		{"write token post", "POST", "/v1/records", s.cfg.HTTPToken, post, http.StatusCreated},
		{"read token get", "GET", "/v1/threads/th/records", s.cfg.HTTPReadToken, "", http.StatusOK},
		{"healthz without token", "GET", "/healthz", "none", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, base(s)+c.path, strings.NewReader(c.body))
		if c.token != "none" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		} else {
			req.Header.Set("Authorization", "Basic x") // not a bearer token: keeps the helper's away
		}
		var e wire.Error
		code, h := callReq(t, http.DefaultClient, req, &e)
		if code != c.want {
			t.Errorf("%s: %d %+v, want %d", c.name, code, e, c.want)
		}
		if code == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
		if code == http.StatusForbidden && (!strings.Contains(e.Error, "write right") || e.Rule != "needs the write right") {
			t.Errorf("%s: 403 does not name the missing right: %+v", c.name, e)
		}
	}
	// The credentials are the directory's, 0600.
	for _, name := range []string{"token", ReadTokenFile} {
		fi, err := os.Stat(filepath.Join(s.cfg.Dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", name, fi.Mode(), err)
		}
	}
	// NATS: nothing without the token.
	if nc, err := nats.Connect(s.NATSURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Errorf("NATS connect without credentials: accepted")
	}
}

func TestInsecureNoAuth(t *testing.T) {
	s := start(t, Config{InsecureNoAuth: true})
	var h healthJSON
	if code := call(t, "GET", base(s)+"/healthz", "", &h); code != http.StatusOK || len(h.Warnings) == 0 || !strings.Contains(h.Warnings[0], "insecure-no-auth") {
		t.Errorf("healthz: %d %+v, want 200 with the warning", code, h)
	}
	req, _ := http.NewRequest("GET", base(s)+"/v1/threads", nil)
	req.Header.Set("Authorization", "Basic x")
	if code, _ := callReq(t, http.DefaultClient, req, nil); code != http.StatusOK {
		t.Errorf("GET without credentials: %d, want 200", code)
	}
	c, err := sdk.Connect(context.Background(), s.NATSURL(), sdk.WithActor(actor))
	if err != nil {
		t.Fatalf("Connect without credentials: %v", err)
	}
	c.Close()
	if _, err := New(Config{Dir: "d", InsecureNoAuth: true, Token: "t"}, nil); err == nil || !strings.Contains(err.Error(), "InsecureNoAuth") {
		t.Errorf("InsecureNoAuth with a token: %v, want refused", err)
	}
}

// startTLS starts a server whose HTTP API is served over TLS with a
// certificate of a test CA, which also signs dir/client.pem (a client
// certificate it accepts); pool trusts the CA.
func startTLS(t *testing.T) (s *Server, dir string, pool *x509.CertPool) {
	t.Helper()
	dir = t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "client", ca, caKey)
	s = start(t, Config{HTTPTLSCert: filepath.Join(dir, "server.pem"), HTTPTLSKey: filepath.Join(dir, "server.key"), HTTPClientCA: filepath.Join(dir, "ca.pem")})
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return s, dir, pool
}

// TestHTTPTLS serves the API over TLS: a client certificate signed by the
// client CA authenticates, a plain-text request is refused.
func TestHTTPTLS(t *testing.T) {
	s, dir, pool := startTLS(t)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	u := "https://" + s.HTTPAddr()
	post := emitBody("th", "DO", "agent.step", `{"n":1}`)
	for _, c := range []struct {
		name   string
		client *http.Client
		token  string
		want   int
	}{
		{"client certificate", withCert, "", http.StatusCreated},
		{"no certificate, no token", noCert, "", http.StatusUnauthorized},
		{"no certificate, write token", noCert, s.cfg.HTTPToken, http.StatusCreated},
	} {
		req, _ := http.NewRequest("POST", u+"/v1/records", strings.NewReader(post))
		req.Header.Set("Authorization", "Basic x")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if code, _ := callReq(t, c.client, req, nil); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS listener: %d, want refused", resp.StatusCode)
		}
	}
}

// newCert writes name.pem and name.key in dir: a CA when parent is nil,
// else a certificate for 127.0.0.1 signed by it.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}
