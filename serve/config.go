package serve

import (
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/storekey"
)

// Defaults of a Config.
const (
	DefaultListen          = "127.0.0.1:4222"
	DefaultHTTP            = "127.0.0.1:7475"
	DefaultMaxRecord       = sdk.DefaultMaxRecord // bytes of one record's envelope
	DefaultHeartbeat       = 15 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultThreadsWait     = 2 * time.Second // GET /v1/threads' wait for the thread index

	DefaultHTTPReadTimeout  = 30 * time.Second  // one request, headers and body
	DefaultHTTPWriteTimeout = 60 * time.Second  // one answer; one write of an SSE tail
	DefaultHTTPIdleTimeout  = 120 * time.Second // a keep-alive connection between requests
	DefaultHTTPMaxConns     = 1024              // HTTP connections open at once
)

// maxPayload is the largest NATS message the server accepts: a record of
// records.MaxEncodedSize with its headers fits with room to spare. It is
// the embedded server's limit too.
const maxPayload = 8 << 20

// Config configures a Server. Its zero value, with Dir set, serves the
// data directory on loopback with the defaults above. Fields that map to
// nats-server options say so; those options are nats-server's own, passed
// through, not reimplemented.
type Config struct {
	// Dir is the data directory: the JetStream store lives in
	// Dir/jetstream, as with the embedded log. Required.
	Dir string
	// Listen is the NATS client listener, host:port (DefaultListen when
	// empty; port 0 picks a free one).
	Listen string
	// HTTP is the HTTP API listener, host:port (DefaultHTTP when empty;
	// port 0 picks a free one).
	HTTP string
	// NoHTTP turns the HTTP API off.
	NoHTTP bool
	// AllowRemote must be set to listen (NATS, cluster or HTTP) on an
	// address that is not loopback.
	AllowRemote bool

	// ServerName names this node (nats-server server_name). Required in a
	// cluster, where it must be unique and stable across restarts.
	ServerName string
	// ClusterName, when set, makes this node one of a cluster (nats-server
	// cluster.name).
	ClusterName string
	// ClusterListen is the route listener, host:port (cluster.listen).
	// Required with ClusterName.
	ClusterListen string
	// Routes are the route URLs of the other nodes, nats://host:port
	// (cluster.routes).
	Routes []string
	// RouteSecret is the secret every node of the cluster shares: a route
	// must present it (as user spl-route) to be taken as a peer, and this
	// node presents it on its own routes. A cluster needs it (at least 16
	// characters), unless NATSConfigFile authenticates the routes itself
	// (cluster.authorization, or TLS that verifies the peer's certificate)
	// or InsecureRoutes is set: an unauthenticated route listener lets any
	// process that reaches it join as a peer and read, forge and purge
	// everything.
	RouteSecret string
	// InsecureRoutes lets a cluster's routes in without a secret, for a
	// trusted test network only.
	InsecureRoutes bool
	// Replicas of the log's stream when this node creates it: 1 when zero
	// on a single node, 3 when zero in a cluster.
	Replicas int

	// NATSConfigFile is a nats-server configuration file applied before
	// the fields below and above (which override it when set): for
	// accounts, decentralized auth or any option Config does not name.
	NATSConfigFile string
	// Token requires clients to present this token (authorization.token).
	Token string
	// User and Password require clients to log in (authorization.user,
	// authorization.password).
	User, Password string
	// NKeys are the public user nkeys allowed to connect
	// (authorization.users[].nkey).
	NKeys []string
	// TLSCert and TLSKey are the listener's certificate and key (tls.cert_file,
	// tls.key_file); TLSCA verifies client certificates (tls.ca_file);
	// TLSVerify requires them (tls.verify).
	TLSCert, TLSKey, TLSCA string
	TLSVerify              bool

	// InsecureNoAuth turns authentication off, on the NATS listener and
	// the HTTP API alike: anyone who reaches the server can read, write
	// and erase. For a trusted test network only; the server says so in
	// its log at start (WARN) and in /healthz. It excludes every
	// credential field.
	InsecureNoAuth bool
	// HTTPToken is the bearer token of HTTP clients that write (and
	// read). Empty: Token when set, else the directory's token (Dir/token,
	// which is also the NATS token unless User, NKeys or NATSConfigFile
	// set other NATS credentials), created on the first start.
	HTTPToken string
	// HTTPReadToken is the bearer token of HTTP clients that only read
	// (GET): a request of another method with it is refused (403).
	// Empty: Dir/read-token, created on the first start.
	HTTPReadToken string
	// HTTPTLSCert and HTTPTLSKey serve the HTTP API over TLS.
	// HTTPClientCA, with them, verifies client certificates: a request
	// that presents one signed by it is authenticated with the write
	// right, without a token.
	HTTPTLSCert, HTTPTLSKey, HTTPClientCA string

	// EncryptionKeyFile, when set, encrypts the store at rest with the key
	// in this file, through nats-server's JetStream store encryption: the
	// log, the read models and the large payloads alike. A key file is 32
	// random bytes, mode 0600, outside Dir (package storekey; spl key new
	// makes one). The first start with it marks Dir's store encrypted; a
	// start with the wrong key, or without one, is refused then
	// (storekey.ErrWrongKey, ErrKeyRequired), and so is one with a key on
	// a store that holds data not encrypted (ErrNotEncrypted). The
	// processes on Dir's embedded default need the same key
	// (SPL_ENCRYPTION_KEY_FILE).
	EncryptionKeyFile string
	// EncryptionCipher is the cipher of a store encrypted from now on:
	// natsio's "chacha20-poly1305" (ChaCha20-Poly1305, the default) or
	// "aes-gcm" (AES-256-GCM). A store already encrypted keeps its own.
	EncryptionCipher string

	// RequireSigned refuses every record that is not signed by the key
	// bound to its actor, whichever face wrote it (sdk.WithRequireSigned):
	// HTTP answers 400 naming the field actor (unsigned) or signature.
	RequireSigned bool

	// Timeout bounds one request of the log to the server (log.Options.Timeout).
	Timeout time.Duration
	// MaxRecord is the largest record the server takes, in bytes of its
	// envelope (sdk.WithMaxRecord; DefaultMaxRecord when zero): larger
	// ones are refused, over HTTP with 413 naming the field body.
	MaxRecord int
	// MaxBody bounds an HTTP request body: MaxRecord and a quarter more
	// when zero, for the JSON a body of MaxRecord bytes takes.
	MaxBody int64
	// ThreadsWait bounds how long GET /v1/threads waits for the thread
	// index to apply the log's last clock before it answers what the index
	// holds (DefaultThreadsWait when zero).
	ThreadsWait time.Duration
	// Heartbeat is the interval of SSE comments that keep a tail alive
	// through proxies (DefaultHeartbeat when zero).
	Heartbeat time.Duration
	// ShutdownTimeout bounds Run's graceful shutdown (DefaultShutdownTimeout
	// when zero).
	ShutdownTimeout time.Duration

	// HTTPReadTimeout bounds reading one HTTP request, headers and body
	// (http.Server.ReadTimeout; DefaultHTTPReadTimeout when zero): a client
	// that sends half a body and stalls is cut off after it.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds writing one HTTP answer from the end of its
	// request's headers (http.Server.WriteTimeout; DefaultHTTPWriteTimeout
	// when zero). An SSE tail lives past it: each of its writes gets
	// HTTPWriteTimeout of its own, so it must be longer than Heartbeat.
	HTTPWriteTimeout time.Duration
	// HTTPIdleTimeout bounds how long a keep-alive connection waits for its
	// next request (http.Server.IdleTimeout; DefaultHTTPIdleTimeout when
	// zero).
	HTTPIdleTimeout time.Duration
	// HTTPMaxConns bounds the HTTP connections open at once
	// (DefaultHTTPMaxConns when zero), so that clients never take the file
	// descriptors the log needs. They are shared out (limits.go): at most a
	// quarter wait for a request, the one waiting longest closed to make
	// room for a new one, and the rest go by the right of the credential a
	// request presents, so that stalled clients cannot starve /healthz or
	// another credential's requests; a request over its right's share is
	// answered 429 at once. From 16 up, the listener never stops accepting.
	HTTPMaxConns int
	// IdleExit, when set, makes the server exit once nobody used it for
	// this long (idle.go): no HTTP request in flight, no NATS client but
	// its own. The SDKs start the local server with it.
	IdleExit time.Duration
	// RetentionEvery, when set, makes the server enforce the retention
	// policies on every thread that often (retention.go), as
	// RetentionActor, which it then requires: a policy's expiry then takes
	// effect whether or not anyone saves or runs spl retention apply.
	RetentionEvery time.Duration
	// RetentionActor is the actor of the erasure records the schedule
	// appends (a DID).
	RetentionActor string

	// Projectors, when set, is called once the log is open and returns the
	// projectors the server runs until shutdown. The projections runtime
	// plugs in here (see Projector).
	Projectors func(*sdk.Client) ([]Projector, error)
}

// ConfigError is a Config that breaks a rule: it names the field and the
// rule, and the error behind the rule, if any (a key file that is not
// one: storekey.ErrKeyFile).
type ConfigError struct {
	Field string
	Rule  string
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string { return "spl/serve: config: " + e.Field + ": " + e.Rule }

// Unwrap returns the error behind the rule.
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// withDefaults returns c with its defaults filled in.
func (c Config) withDefaults() Config {
	replicas := 1
	if c.ClusterName != "" {
		replicas = 3
	}
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.HTTP = cmp.Or(c.HTTP, DefaultHTTP)
	c.Replicas = cmp.Or(c.Replicas, replicas)
	c.MaxRecord = cmp.Or(c.MaxRecord, DefaultMaxRecord)
	c.MaxBody = cmp.Or(c.MaxBody, int64(c.MaxRecord)+int64(c.MaxRecord)/4)
	c.Heartbeat = cmp.Or(c.Heartbeat, DefaultHeartbeat)
	c.ThreadsWait = cmp.Or(c.ThreadsWait, DefaultThreadsWait)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.HTTPReadTimeout = cmp.Or(c.HTTPReadTimeout, DefaultHTTPReadTimeout)
	c.HTTPWriteTimeout = cmp.Or(c.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	c.HTTPIdleTimeout = cmp.Or(c.HTTPIdleTimeout, DefaultHTTPIdleTimeout)
	c.HTTPMaxConns = cmp.Or(c.HTTPMaxConns, DefaultHTTPMaxConns)
	return c
}

// validate checks c (with defaults applied) and returns the first rule it
// breaks as a *ConfigError.
func (c Config) validate() error {
	if c.Dir == "" {
		return configErr("Dir", "required")
	}
	if err := c.checkAddr("Listen", c.Listen); err != nil {
		return err
	}
	if !c.NoHTTP {
		if err := c.checkAddr("HTTP", c.HTTP); err != nil {
			return err
		}
	}
	switch {
	case c.ClusterName != "" && c.ClusterListen == "":
		return configErr("ClusterListen", "required with ClusterName")
	case c.ClusterName == "" && (c.ClusterListen != "" || len(c.Routes) > 0):
		return configErr("ClusterName", "required with ClusterListen or Routes")
	case c.ClusterName != "" && c.ServerName == "":
		return configErr("ServerName", "required in a cluster: JetStream knows its peers by name")
	case strings.ContainsAny(c.ClusterName, " \t\n.*>"):
		return configErr("ClusterName", "must not contain spaces, '.', '*' or '>', got %q", c.ClusterName)
	case c.Replicas < 1 || c.Replicas > 5:
		return configErr("Replicas", "must be 1 to 5, got %d", c.Replicas)
	case c.Replicas > 1 && c.ClusterName == "":
		return configErr("Replicas", "more than 1 needs a cluster (ClusterName), got %d", c.Replicas)
	case c.Token != "" && (c.User != "" || len(c.NKeys) > 0):
		return configErr("Token", "cannot be combined with User or NKeys")
	case (c.User == "") != (c.Password == ""):
		return configErr("Password", "User and Password go together")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return configErr("TLSKey", "TLSCert and TLSKey go together")
	case c.TLSVerify && c.TLSCA == "":
		return configErr("TLSCA", "required with TLSVerify")
	case c.InsecureNoAuth && (c.Token != "" || c.User != "" || len(c.NKeys) > 0 || c.HTTPToken != "" || c.HTTPReadToken != "" || c.HTTPClientCA != ""):
		return configErr("InsecureNoAuth", "turns authentication off: it cannot be combined with Token, User, NKeys, HTTPToken, HTTPReadToken or HTTPClientCA")
	case c.HTTPToken != "" && c.HTTPToken == c.HTTPReadToken:
		return configErr("HTTPReadToken", "must differ from HTTPToken: a read token must not write")
	case c.HTTPToken != "" && len(c.HTTPToken) < 16:
		return configErr("HTTPToken", "a token must be at least 16 characters")
	case c.HTTPReadToken != "" && len(c.HTTPReadToken) < 16:
		return configErr("HTTPReadToken", "a token must be at least 16 characters")
	case (c.HTTPTLSCert == "") != (c.HTTPTLSKey == ""):
		return configErr("HTTPTLSKey", "HTTPTLSCert and HTTPTLSKey go together")
	case c.HTTPClientCA != "" && c.HTTPTLSCert == "":
		return configErr("HTTPClientCA", "needs HTTPTLSCert: client certificates are a part of TLS")
	case c.MaxRecord < records.MaxEncodedSize || c.MaxRecord > records.MaxRecordSize:
		return configErr("MaxRecord", "must be %d to %d bytes, got %d", records.MaxEncodedSize, records.MaxRecordSize, c.MaxRecord)
	case c.MaxBody < 1024:
		return configErr("MaxBody", "must be at least 1024 bytes, got %d", c.MaxBody)
	case c.ThreadsWait < 0:
		return configErr("ThreadsWait", "must not be negative, got %v", c.ThreadsWait)
	case c.Heartbeat < 100*time.Millisecond:
		return configErr("Heartbeat", "must be at least 100ms, got %v", c.Heartbeat)
	case c.Timeout < 0:
		return configErr("Timeout", "must not be negative, got %v", c.Timeout)
	case c.HTTPReadTimeout < 0:
		return configErr("HTTPReadTimeout", "must not be negative, got %v", c.HTTPReadTimeout)
	case c.HTTPWriteTimeout <= c.Heartbeat:
		return configErr("HTTPWriteTimeout", "must be longer than Heartbeat (%v): an SSE tail writes a heartbeat every Heartbeat, got %v", c.Heartbeat, c.HTTPWriteTimeout)
	case c.HTTPIdleTimeout < 0:
		return configErr("HTTPIdleTimeout", "must not be negative, got %v", c.HTTPIdleTimeout)
	case c.HTTPMaxConns < 0:
		return configErr("HTTPMaxConns", "must not be negative, got %d", c.HTTPMaxConns)
	case c.IdleExit < 0 || c.IdleExit > 0 && c.IdleExit < time.Second:
		return configErr("IdleExit", "must be 0 (never) or at least 1s, got %v", c.IdleExit)
	case c.RetentionEvery < 0 || c.RetentionEvery > 0 && c.RetentionEvery < time.Second:
		return configErr("RetentionEvery", "must be 0 (never) or at least 1s, got %v", c.RetentionEvery)
	case c.RetentionEvery > 0 && c.RetentionActor == "":
		return configErr("RetentionActor", "is required with RetentionEvery: the erasure records the schedule appends name their actor")
	case c.RetentionActor != "" && c.RetentionEvery == 0:
		return configErr("RetentionActor", "goes with RetentionEvery, which is not set")
	case c.EncryptionCipher != "" && c.EncryptionCipher != natsio.CipherChaCha && c.EncryptionCipher != natsio.CipherAES:
		return configErr("EncryptionCipher", "must be %s or %s, got %q", natsio.CipherChaCha, natsio.CipherAES, c.EncryptionCipher)
	case c.EncryptionCipher != "" && c.EncryptionKeyFile == "":
		return configErr("EncryptionCipher", "needs EncryptionKeyFile: it is the cipher of the store's encryption")
	case c.RetentionEvery > 0 && c.RequireSigned:
		return configErr("RetentionEvery", "cannot run under RequireSigned: the server holds no actor's key to sign the erasure records; run spl retention apply with the actor's key instead")
	}
	if c.RetentionActor != "" {
		if err := records.CheckActorDID(c.RetentionActor); err != nil {
			return configErr("RetentionActor", "%v", err)
		}
	}
	if c.ClusterName != "" {
		if err := c.checkAddr("ClusterListen", c.ClusterListen); err != nil {
			return err
		}
	}
	for i, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "nats-route" && u.Scheme != "tls") || u.Host == "" {
			return configErr(fmt.Sprintf("Routes[%d]", i), "must be a URL nats://host:port, got %q", r)
		}
	}
	for i, k := range c.NKeys {
		if !strings.HasPrefix(k, "U") || len(k) != 56 {
			return configErr(fmt.Sprintf("NKeys[%d]", i), "must be a public user nkey (56 characters, starting with U)")
		}
	}
	return nil
}

// checkAddr checks a host:port listener address, and that it is loopback
// unless AllowRemote.
func (c Config) checkAddr(field, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return configErr(field, "must be host:port, got %q", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return configErr(field, "port must be 0 to 65535, got %q", port)
	}
	if !c.AllowRemote && !isLoopback(host) {
		return configErr(field, "%q is not a loopback address; listening on it needs AllowRemote", host)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// internalUser is the user the server's own in-process connection logs in
// as when the listener requires user or nkey authentication.
const internalUser = "spl-serve-internal"

// selfSync says whether the server runs without SyncAlways and the
// server's own client fsyncs what it writes, as the embedded log does:
// on one node whose store spl lays out itself (no cluster, no NATS
// config file). It is one fsync a group commit, where SyncAlways is one
// a message, and it spares the staging of every atomic batch in a store
// of its own on disk (nats-server does that for a batch on one replica).
func (c Config) selfSync() bool { return c.ClusterName == "" && c.NATSConfigFile == "" }

// natsOptions builds the nats-server options of c, and the nats.go options
// of the server's own in-process connection.
func (c Config) natsOptions() (*server.Options, []nats.Option, error) {
	o := &server.Options{}
	if c.NATSConfigFile != "" {
		fo, err := server.ProcessConfigFile(c.NATSConfigFile)
		if err != nil {
			return nil, nil, fmt.Errorf("nats config %s: %w", c.NATSConfigFile, err)
		}
		o = fo
	}
	host, port, _ := net.SplitHostPort(c.Listen)
	o.Host, o.Port = host, listenPort(port)
	if c.ServerName != "" {
		o.ServerName = c.ServerName
	}
	o.JetStream = true
	o.StoreDir = c.Dir // the server keeps its store in Dir/jetstream
	// On one node the log's writer fsyncs the blocks it wrote, once a
	// group commit (Config.selfSync); a cluster's server fsyncs each
	// message itself.
	o.SyncAlways = !c.selfSync()
	o.NoSigs = true // the caller handles signals and shuts down in order
	if o.MaxPayload == 0 {
		o.MaxPayload = maxPayload
	}
	o.DisableShortFirstPing = true
	if c.ClusterName != "" {
		h, p, _ := net.SplitHostPort(c.ClusterListen)
		o.Cluster.Name, o.Cluster.Host, o.Cluster.Port = c.ClusterName, h, listenPort(p)
		if len(c.Routes) > 0 {
			o.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
		}
		if err := c.authenticateRoutes(o); err != nil {
			return nil, nil, err
		}
	}
	var own []nats.Option
	switch {
	case c.Token != "":
		o.Authorization = c.Token
		own = append(own, nats.Token(c.Token))
	case c.User != "" || len(c.NKeys) > 0 || len(o.Users) > 0 || len(o.Nkeys) > 0:
		if c.User != "" {
			o.Users = append(o.Users, &server.User{Username: c.User, Password: c.Password})
		}
		for _, k := range c.NKeys {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: k})
		}
		pw, err := randomSecret()
		if err != nil {
			return nil, nil, err
		}
		o.Users = append(o.Users, &server.User{Username: internalUser, Password: pw})
		own = append(own, nats.UserInfo(internalUser, pw))
	case o.Authorization != "":
		own = append(own, nats.Token(o.Authorization))
	case o.Username != "":
		own = append(own, nats.UserInfo(o.Username, o.Password))
	}
	if c.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: c.TLSCert, KeyFile: c.TLSKey, CaFile: c.TLSCA, Verify: c.TLSVerify,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify = tc, true, c.TLSVerify
		o.TLSTimeout = 2
	}
	return o, own, nil
}

// listenPort maps a port of a Config (0: any free port) to nats-server's
// convention (-1: any free port; 0: the default port).
func listenPort(p string) int {
	n, _ := strconv.Atoi(p)
	if n == 0 {
		return -1
	}
	return n
}

func randomSecret() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random secret: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// RouteUser is the user a route logs in as with the cluster's RouteSecret.
const RouteUser = "spl-route"

// authenticateRoutes makes o's route listener require the cluster's
// secret and o's own routes present it; or checks that the configuration
// file authenticates routes itself, or that InsecureRoutes says not to.
func (c Config) authenticateRoutes(o *server.Options) error {
	switch {
	case c.RouteSecret != "":
		if len(c.RouteSecret) < 16 {
			return configErr("RouteSecret", "a route secret must be at least 16 characters")
		}
		o.Cluster.Username, o.Cluster.Password = RouteUser, c.RouteSecret
		for _, u := range o.Routes {
			u.User = url.UserPassword(RouteUser, c.RouteSecret)
		}
	case o.Cluster.Username != "" || o.Cluster.TLSConfig != nil && o.Cluster.TLSConfig.ClientAuth == tls.RequireAndVerifyClientCert:
		// The configuration file's own route authentication.
	case c.InsecureRoutes:
	default:
		return configErr("RouteSecret", "a cluster's routes need a secret every node shares (--cluster-secret-file FILE), or authentication in --nats-config (cluster authorization, or TLS with verify); --insecure-routes only on a trusted test network")
	}
	return nil
}

// encryption loads the keys of c, or returns a *ConfigError that names the
// field and wraps storekey.ErrKeyFile.
func (c Config) encryption() (natsio.Encryption, error) {
	enc := natsio.Encryption{Cipher: c.EncryptionCipher, Hint: "pass --encryption-key-file FILE (or set " + env.EncryptionKeyFileVar + ")"}
	if c.EncryptionKeyFile == "" {
		return enc, nil
	}
	key, err := storekey.Load(c.EncryptionKeyFile)
	if err != nil {
		return enc, &ConfigError{Field: "EncryptionKeyFile", Rule: err.Error(), Err: err}
	}
	enc.Key = key
	return enc, nil
}
