package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/serve"
)

func newServeCommand(a *app) *cobra.Command {
	var cfg serve.Config
	var logFormat, logLevel, addrFile string
	var tokenFile, httpTokenFile, httpReadTokenFile, routeSecretFile string
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Run the log as a server: NATS for clients, an HTTP API, metrics",
		Long: `Run the log of the data directory as a server: a NATS server with
JetStream (every append fsynced before its ack) listening for spl clients
(--server / SPL_SERVER), and an HTTP API (docs/http-api.yaml) with
/healthz and Prometheus /metrics. It runs the projections (the thread
and checkpoint index) as records land, so that reads of them do not wait
to catch up. Listens on loopback unless
--allow-remote. With --cluster-name it is one node of a cluster
(docs/cluster.md). SIGINT or SIGTERM shuts it down gracefully.

Clients authenticate by default. On its first start spl serve creates,
mode 0600, DIR/token (NATS and HTTP clients that write),
DIR/read-token (NATS and HTTP clients that only read; the reviewer's
page at / takes it too) and DIR/admin-token (everything, and the actor
key bindings), shows them once on a terminal and logs where they are;
--token-file, --http-token-file and --http-read-token-file (or --user,
--nkey, --nats-config) set credentials of your own. Pass secrets in
files or the environment: --token and --password are visible to every
user in ps. --insecure-no-auth turns authentication off, for a trusted
test network only.

--encryption-key-file FILE (default $SPL_ENCRYPTION_KEY_FILE) encrypts
the store at rest with the key in FILE, 32 random bytes (spl key new):
nats-server's JetStream store encryption, --encryption-cipher
chacha20-poly1305 (the default) or aes-gcm. A start with the wrong key or
without one is refused; so is one with a key on a directory that holds
data not encrypted.

--require-signed refuses records not signed by the key bound to their
actor (spl actor). Writes then go through the HTTP API, where the
signatures are checked: the write token publishes no record over NATS
(spl emit --server … is refused, exit 3, permission denied).`,
		Example: `  spl serve
  spl --server nats://127.0.0.1:4222 --token-file ~/.spl/token session list
  curl -H "Authorization: Bearer $(cat ~/.spl/read-token)" 127.0.0.1:7475/v1/threads
  spl serve --listen 0.0.0.0:4222 --allow-remote --token-file /etc/spl/token --tls-cert cert.pem --tls-key key.pem
  spl serve --name n1 --cluster-name spl --cluster 127.0.0.1:6222 --cluster-secret-file /etc/spl/cluster-secret --routes nats://127.0.0.1:6223,nats://127.0.0.1:6224`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			dir, err := a.dir()
			if err != nil {
				return err
			}
			cfg.Dir = dir
			// Secrets from the environment are read here, not as flag
			// defaults, which --help would print.
			if cfg.Token == "" && tokenFile == "" {
				cfg.Token = env.ServeToken()
			}
			if cfg.Password == "" {
				cfg.Password = env.ServePassword()
			}
			if cfg.EncryptionKeyFile == "" {
				cfg.EncryptionKeyFile = env.EncryptionKeyFile()
			}
			for _, tf := range []struct {
				flag, file string
				to         *string
			}{{"--token-file", tokenFile, &cfg.Token}, {"--http-token-file", httpTokenFile, &cfg.HTTPToken}, {"--http-read-token-file", httpReadTokenFile, &cfg.HTTPReadToken},
				{"--cluster-secret-file", routeSecretFile, &cfg.RouteSecret}} {
				if tf.file == "" {
					continue
				}
				tok, err := sdk.ReadTokenFile(tf.file)
				if err != nil {
					return usagef("serve: %s: %v", tf.flag, err)
				}
				*tf.to = tok
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usagef("serve: --log-level: must be debug, info, warn or error, got %q", logLevel)
			}
			hopts := &slog.HandlerOptions{Level: level}
			var h slog.Handler
			switch logFormat {
			case "json":
				h = slog.NewJSONHandler(cmd.ErrOrStderr(), hopts)
			case "text":
				h = slog.NewTextHandler(cmd.ErrOrStderr(), hopts)
			default:
				return usagef("serve: --log-format: must be text or json, got %q", logFormat)
			}
			logger := slog.New(h)
			cfg.Projectors = serve.IndexProjector(cmd.Context(), cfg, logger)
			s, err := serve.New(cfg, logger)
			if err != nil {
				var ce *serve.ConfigError
				if errors.As(err, &ce) {
					return usagef("serve: %s: %s", serveFlag(ce.Field), serveFlagRule(ce.Rule))
				}
				return usagef("serve: %v", err)
			}
			if err := s.Start(cmd.Context()); err != nil {
				return err
			}
			printCreated(cmd.ErrOrStderr(), s.CreatedCredentials())
			if addrFile != "" && !cfg.NoHTTP {
				if err := writeAddrFile(addrFile, s.HTTPAddr()); err != nil {
					_ = s.Shutdown(context.Background())
					return err
				}
				defer removeAddrFile(addrFile)
			}
			select {
			case <-cmd.Context().Done(): // SIGINT/SIGTERM; a second signal kills
			case <-s.Idle(): // --idle-exit
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			return s.Shutdown(ctx)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", serve.DefaultListen, "NATS client listener host:port")
	f.StringVar(&cfg.HTTP, "http", serve.DefaultHTTP, "HTTP API listener host:port")
	f.BoolVar(&cfg.NoHTTP, "no-http", false, "turn the HTTP API off")
	f.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow listening on addresses that are not loopback")
	f.StringVar(&cfg.ServerName, "name", "", "server name, unique and stable in a cluster")
	f.StringVar(&cfg.ClusterName, "cluster-name", "", "cluster name: run as one node of a cluster")
	f.StringVar(&cfg.ClusterListen, "cluster", "", "route listener host:port of this node")
	f.StringSliceVar(&cfg.Routes, "routes", nil, "route URLs of the other nodes (nats://host:port, comma-separated)")
	f.StringVar(&routeSecretFile, "cluster-secret-file", "", "secret every node of the cluster shares, in this file: routes without it are refused")
	f.BoolVar(&cfg.InsecureRoutes, "insecure-routes", false, "let routes in without a secret: a trusted test network only")
	f.IntVar(&cfg.Replicas, "replicas", 0, "replicas of the stream when it is created (default 1, 3 in a cluster)")
	f.StringVar(&cfg.NATSConfigFile, "nats-config", "", "nats-server configuration file (accounts, TLS, ...), applied before the flags")
	f.StringVar(&cfg.Token, "token", "", "require this token from NATS clients (default $SPL_SERVE_TOKEN; visible in ps: prefer --token-file or the variable)")
	f.StringVar(&tokenFile, "token-file", "", "require the token in this file from NATS clients (default: DIR/token, created on first start)")
	f.StringVar(&httpTokenFile, "http-token-file", "", "bearer token in this file for HTTP clients that write (default: the NATS token file)")
	f.StringVar(&httpReadTokenFile, "http-read-token-file", "", "bearer token in this file for HTTP clients that only read (default: DIR/read-token)")
	f.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", false, "no authentication at all, NATS and HTTP: a trusted test network only")
	f.BoolVar(&cfg.RequireSigned, "require-signed", false, "refuse records not signed by the key bound to their actor (spl actor)")
	f.StringVar(&cfg.EncryptionKeyFile, "encryption-key-file", "", "encrypt the store at rest with the key in this file, 32 random bytes (spl key new; default $SPL_ENCRYPTION_KEY_FILE)")
	f.StringVar(&cfg.EncryptionCipher, "encryption-cipher", "", "cipher of a store encrypted from now on: chacha20-poly1305 (default) or aes-gcm")
	f.StringVar(&cfg.HTTPTLSCert, "http-tls-cert", "", "TLS certificate of the HTTP API")
	f.StringVar(&cfg.HTTPTLSKey, "http-tls-key", "", "TLS key of the HTTP API")
	f.StringVar(&cfg.HTTPClientCA, "http-client-ca", "", "CA of HTTP client certificates, which then authenticate (write right)")
	f.StringVar(&cfg.User, "user", "", "require this user from clients (with --password)")
	f.StringVar(&cfg.Password, "password", "", "password of --user (default $SPL_SERVE_PASSWORD; visible in ps: prefer the variable)")
	f.StringSliceVar(&cfg.NKeys, "nkey", nil, "public user nkey allowed to connect (repeatable)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate of the NATS listener")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "TLS key of the NATS listener")
	f.StringVar(&cfg.TLSCA, "tls-ca", "", "CA that signs client certificates")
	f.BoolVar(&cfg.TLSVerify, "tls-verify", false, "require client certificates signed by --tls-ca")
	f.DurationVar(&cfg.Timeout, "request-timeout", 0, "bound on one request of the server's own log to its NATS server (default 10s)")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", serve.DefaultShutdownTimeout, "bound on the graceful shutdown")
	f.DurationVar(&cfg.HTTPReadTimeout, "http-read-timeout", serve.DefaultHTTPReadTimeout, "bound on reading one HTTP request, headers and body")
	f.DurationVar(&cfg.HTTPWriteTimeout, "http-write-timeout", serve.DefaultHTTPWriteTimeout, "bound on writing one HTTP answer (an SSE tail: on each write)")
	f.DurationVar(&cfg.HTTPIdleTimeout, "http-idle-timeout", serve.DefaultHTTPIdleTimeout, "bound on a keep-alive HTTP connection's wait for its next request")
	f.IntVar(&cfg.MaxRecord, "max-record", serve.DefaultMaxRecord, "largest record taken, in bytes of its encoding (a record over 1 MiB keeps its body beside the log); HTTP request bodies may be a quarter larger")
	f.IntVar(&cfg.HTTPMaxConns, "http-max-conns", serve.DefaultHTTPMaxConns, "HTTP connections open at once, shared out by credential; the oldest not yet sent a request is closed for a new one")
	f.DurationVar(&cfg.RetentionEvery, "retention-every", 0, "enforce the retention policies on every thread this often, as --retention-actor (0: only at saves and spl retention apply)")
	f.StringVar(&cfg.RetentionActor, "retention-actor", "", "actor DID of the erasure records --retention-every appends")
	f.DurationVar(&cfg.IdleExit, "idle-exit", 0, "exit once nobody used the server for this long: no HTTP request, no NATS client but its own (0: never)")
	f.StringVar(&addrFile, "http-addr-file", "", "write the HTTP API's bound host:port to this file once listening (for --http 127.0.0.1:0); removed on shutdown")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// serveFlags maps the fields of a serve.Config to the flags that set them,
// so that a configuration error names what the user typed.
var serveFlags = map[string]string{
	"Dir": "--home", "Listen": "--listen", "HTTP": "--http", "NoHTTP": "--no-http",
	"AllowRemote": "--allow-remote", "ServerName": "--name", "ClusterName": "--cluster-name",
	"ClusterListen": "--cluster", "Routes": "--routes", "Replicas": "--replicas",
	"RouteSecret": "--cluster-secret-file", "InsecureRoutes": "--insecure-routes",
	"NATSConfigFile": "--nats-config", "Token": "--token", "User": "--user", "Password": "--password",
	"NKeys": "--nkey", "TLSCert": "--tls-cert", "TLSKey": "--tls-key", "TLSCA": "--tls-ca",
	"TLSVerify": "--tls-verify", "ShutdownTimeout": "--shutdown-timeout", "Timeout": "--request-timeout",
	"HTTPReadTimeout": "--http-read-timeout", "HTTPWriteTimeout": "--http-write-timeout", "IdleExit": "--idle-exit",
	"HTTPIdleTimeout": "--http-idle-timeout", "HTTPMaxConns": "--http-max-conns", "MaxRecord": "--max-record",
	"RetentionEvery": "--retention-every", "RetentionActor": "--retention-actor",
	"InsecureNoAuth": "--insecure-no-auth", "HTTPToken": "--http-token-file", "HTTPReadToken": "--http-read-token-file",
	"HTTPTLSCert": "--http-tls-cert", "HTTPTLSKey": "--http-tls-key", "HTTPClientCA": "--http-client-ca",
	"EncryptionKeyFile": "--encryption-key-file", "EncryptionCipher": "--encryption-cipher",
}

// serveFlag is the flag of a serve.ConfigError's field: "--routes" for
// "Routes[1]" (the flag's second value, "value 2"). A field without a flag
// keeps its name.
func serveFlag(field string) string {
	name, index, _ := strings.Cut(field, "[")
	flag, ok := serveFlags[name]
	if !ok {
		return field
	}
	if i, err := strconv.Atoi(strings.TrimSuffix(index, "]")); err == nil {
		return fmt.Sprintf("%s (value %d)", flag, i+1)
	}
	return flag
}

var (
	goQuoted  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	fieldWord = regexp.MustCompile(`\b[A-Z][A-Za-z]*\b`)
)

// serveFlagRule replaces the Config fields a rule names with their flags,
// leaving the quoted values it cites as they are.
func serveFlagRule(rule string) string {
	var b strings.Builder
	last := 0
	words := func(s string) string {
		return fieldWord.ReplaceAllStringFunc(s, func(w string) string {
			if f, ok := serveFlags[w]; ok {
				return f
			}
			return w
		})
	}
	for _, m := range goQuoted.FindAllStringIndex(rule, -1) {
		b.WriteString(words(rule[last:m[0]]))
		b.WriteString(rule[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(words(rule[last:]))
	return b.String()
}

// printCreated shows the secrets spl serve created on this start, once,
// with how to use them, when w is a terminal: a log file or a pipe gets
// the paths only (the server's log line), never the secrets.
func printCreated(w io.Writer, paths []string) {
	f, ok := w.(*os.File)
	if len(paths) == 0 || !ok {
		return
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return
	}
	fmt.Fprintln(w, "spl serve created these credentials (shown once; they stay in the files, mode 0600):")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		fmt.Fprintf(w, "  %-14s %s   (%s)\n", filepath.Base(p), strings.TrimSpace(string(b)), p)
	}
	fmt.Fprintln(w, "Use: Authorization: Bearer <token> over HTTP (read-token: reads and the reviewer's page;")
	fmt.Fprintln(w, "token: writes; admin-token: actor key bindings too); NATS clients: --token-file FILE or SPL_TOKEN_FILE.")
}
