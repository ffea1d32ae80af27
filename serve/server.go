// Package serve runs spl as a server: a NATS server with JetStream on a
// data directory, listening for spl clients (the CLI and SDK with
// --server / SPL_SERVER), the projectors, and an HTTP API with JSON
// endpoints, a Server-Sent Events tail, /healthz and Prometheus /metrics.
//
//	srv, err := serve.New(serve.Config{Dir: dir}, slog.Default())
//	if err != nil { ... }
//	if err := srv.Start(ctx); err != nil { ... }
//	<-srv.Ready() // the log is open: appends are accepted
//	...
//	err = srv.Shutdown(ctx)
//
// or simply serve.Run(ctx, cfg, logger), which shuts down when ctx is done.
//
// Shutdown keeps every acknowledged record: it refuses new appends, waits
// for the requests in flight, stops the projectors at their stored
// position, drains the log's writer, and only then stops the NATS server.
//
// The server takes the data directory's lock, so no embedded spl process
// runs a second server on the same store. Unless configured otherwise its
// NATS listener requires the directory's token (auth.go), as the embedded
// server does, and it publishes its address in the directory the way the
// embedded log does, so that spl commands run on the same directory
// without --server join it.
//
// The HTTP API is documented in docs/http-api.yaml; clusters in
// docs/cluster.md.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/sdk"
)

// Projector is a long-running consumer of the log that the server runs:
// a projections runtime. Run returns when ctx is done, after storing its
// position; Position is the clock of the position it last stored or read
// (projections.Runtime.Position), for the projection lag metric.
type Projector interface {
	Name() string
	Run(ctx context.Context) error
	Position() uint64
}

// Server is one spl server: NATS, the log, projectors and the HTTP API.
type Server struct {
	cfg    Config
	logger *slog.Logger

	nopts *server.Options
	enc   natsio.Encryption // of the store at rest (Config.EncryptionKeyFile)
	own   []nats.Option     // options of the in-process connection
	ns    *server.Server
	mcp   mcpFaces  // the MCP servers of /mcp (mcp.go)
	disk  diskWatch // the disk under the store (storelimit.go, diskfull.go)
	idle  idleWatch // Config.IdleExit (idle.go)
	dir   *natsio.DirLock
	// dirToken: the NATS listener requires the data directory's token
	// (no credentials of the config's own), the one embedded clients send.
	dirToken bool
	created  []string // secrets created by this start (auth.go)
	// adminToken is the admin right's token, on NATS and HTTP (natsauth.go).
	adminToken string

	c     atomic.Pointer[sdk.Client] // the service layer, once the log is open
	door  *door                      // the door of NATS clients' writes (door.go)
	ready chan struct{}

	httpSrv *http.Server
	slotLn  *slotListener // under httpSrv's TLS, if any
	httpLn  net.Listener
	reg     *prometheus.Registry
	m       *metrics
	logins  *loginStore // the browsers logged in (login.go)

	projMu     sync.Mutex
	projectors []Projector

	bg       context.Context // background work: opening the log, projectors
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	tails    context.Context // cancelled first on shutdown: ends SSE tails
	tailStop context.CancelFunc

	stopping atomic.Bool
	started  bool
	shutOnce sync.Once
	shutErr  error
}

// New checks cfg and returns a Server that is not yet started. A nil
// logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	nopts, own, err := cfg.natsOptions()
	if err != nil {
		return nil, fmt.Errorf("spl/serve: %w", err)
	}
	enc, err := cfg.encryption()
	if err != nil {
		return nil, err
	}
	if enc.Key != nil && nopts.JetStreamKey != "" {
		return nil, configErr("EncryptionKeyFile", "the NATS config file sets a JetStream key of its own: use one or the other")
	}
	s := &Server{cfg: cfg, logger: logger, nopts: nopts, enc: enc, own: own, ready: make(chan struct{}), logins: newLoginStore()}
	s.idle.idle = make(chan struct{})
	s.disk.kick = make(chan struct{}, 1)
	s.reg = prometheus.NewRegistry()
	s.m = newMetrics(s.reg, s)
	return s, nil
}

// Run serves cfg until ctx is done, then shuts down gracefully within
// cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	s, err := New(cfg, logger)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}

// Start takes the data directory, starts the NATS server and the HTTP
// API, and opens the log in the background: in a cluster the stream can
// only be created once enough nodes are up. Ready is closed once the log
// is open; until then the API answers 503.
func (s *Server) Start(ctx context.Context) error {
	if s.started {
		return errors.New("spl/serve: start: already started")
	}
	s.started = true
	dl, err := natsio.LockDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("spl/serve: %w", err)
	}
	s.dir = dl
	if err := s.credentials(); err != nil { // see auth.go
		s.dir.Release()
		return fmt.Errorf("spl/serve: %w", err)
	}
	if s.cfg.ClusterName != "" {
		natsio.FastElections() // failover in seconds (faults.md, row 5)
	}
	// The store's key before anything touches the store. A key the NATS
	// config file sets is the file's business.
	var check *natsio.StoreCheck
	if s.nopts.JetStreamKey == "" {
		if check, err = natsio.OpenStore(s.cfg.Dir, s.enc, s.nopts); err != nil {
			s.dir.Release()
			return fmt.Errorf("spl/serve: %w", err)
		}
	}
	s.disk.follow = initStoreLimit(s.nopts, s.cfg.Dir) // see storelimit.go
	ns, err := natsio.StartServer(s.nopts, natsLogger{s.logger.With("component", "nats"), s.diskFull})
	if err != nil {
		s.dir.Release()
		return fmt.Errorf("spl/serve: nats server: %w", err)
	}
	s.ns = ns
	if err := check.Started(ns); err != nil {
		s.stopNATS()
		return fmt.Errorf("spl/serve: %w", err)
	}
	if s.enc.Key != nil {
		s.logger.Info("store encrypted at rest", "cipher", s.nopts.JetStreamCipher.String(), "key_file", s.enc.Key.File)
	}
	s.logger.Info("nats listening", "url", s.NATSURL(), "server_name", ns.Name(), "cluster", s.cfg.ClusterName)
	if (s.cfg.InsecureNoAuth || s.dirToken) && s.cfg.NATSConfigFile == "" && s.cfg.TLSCert == "" {
		if err := s.dir.Publish(ns.Addr().String()); err != nil {
			s.logger.Warn("data directory: cannot publish the address for embedded clients", "err", err)
		}
	}

	s.bg, s.bgCancel = context.WithCancel(context.Background())
	s.tails, s.tailStop = context.WithCancel(context.Background())
	if err := s.startDoor(); err != nil {
		s.bgCancel()
		s.stopNATS()
		return fmt.Errorf("spl/serve: %w", err)
	}
	// One node restarts its JetStream when the disk filled up under it
	// (diskfull.go); a cluster's nodes leave that to nats-server.
	s.disk.restart = s.cfg.ClusterName == "" && !ns.JetStreamIsClustered()
	if s.disk.follow {
		s.raiseStoreLimit() // at once, from the server's own count of used bytes
	}
	if s.disk.follow || s.disk.restart {
		s.bgWG.Add(1)
		go s.watchDisk()
	}
	if !s.cfg.NoHTTP {
		ln, err := net.Listen("tcp", s.cfg.HTTP)
		if err != nil {
			s.bgCancel()
			s.stopNATS()
			return fmt.Errorf("spl/serve: http listen %s: %w", s.cfg.HTTP, err)
		}
		s.httpLn = ln
		s.slotLn = newSlotListener(ln, s.cfg.HTTPMaxConns, s.m.evicted.Inc) // see limits.go
		ln = s.slotLn
		if ln, err = s.cfg.httpTLS(ln); err != nil { // see auth.go
			s.httpLn.Close()
			s.bgCancel()
			s.stopNATS()
			return fmt.Errorf("spl/serve: %w", err)
		}
		s.httpSrv = &http.Server{
			Handler:           s.slots(streamDeadlines(s.authorize(s.routes()), s.cfg.HTTPWriteTimeout)),
			ConnContext:       slotContext,
			ConnState:         slotState,
			ReadHeaderTimeout: min(10*time.Second, s.cfg.HTTPReadTimeout),
			ReadTimeout:       s.cfg.HTTPReadTimeout,
			WriteTimeout:      s.cfg.HTTPWriteTimeout,
			IdleTimeout:       s.cfg.HTTPIdleTimeout,
			ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		}
		go func() {
			if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.logger.Error("http serve", "err", err)
			}
		}()
		scheme := "http"
		if s.cfg.HTTPTLSCert != "" {
			scheme = "https"
		}
		s.logger.Info("http listening", "addr", ln.Addr().String(), "tls", s.cfg.HTTPTLSCert != "", "auth", !s.cfg.InsecureNoAuth,
			"page", scheme+"://"+ln.Addr().String()+"/") // the reviewer's page (page.go)
	}
	s.bgWG.Add(1)
	go s.openLog()
	return nil
}

// openLog opens the log on the in-process connection, retrying until it
// succeeds or the server shuts down, then starts the projectors.
func (s *Server) openLog() {
	defer s.bgWG.Done()
	opts := []sdk.Option{
		sdk.WithNATSOptions(append([]nats.Option{nats.InProcessServer(s.ns)}, s.own...)...),
		sdk.WithReplicas(s.cfg.Replicas),
		sdk.WithTimeout(s.cfg.Timeout),
		sdk.WithMaxRecord(s.cfg.MaxRecord),
		sdk.WithName("spl-serve"),
		sdk.WithBatchObserver(s.m.observeBatch),
		sdk.WithActor(""), // every request names its actor
		sdk.WithMarkDir(s.cfg.Dir),
		sdk.WithoutSigning(), // a client's record is signed by its author or not at all
		sdk.WithoutDoor(),    // it is the door (door.go)
	}
	if s.cfg.selfSync() {
		opts = append(opts, sdk.WithServerStore(s.cfg.Dir))
	}
	if s.cfg.RequireSigned {
		opts = append(opts, sdk.WithRequireSigned())
	}
	if s.adminToken != "" {
		opts = append(opts, sdk.WithBindingsByAdmin()) // see natsauth.go
	}
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(s.bg, 10*time.Second)
		c, err := sdk.Connect(ctx, "nats://in-process", opts...)
		cancel()
		if err == nil {
			s.c.Store(c)
			close(s.ready)
			s.logger.Info("log open", "stream", c.StreamName(), "replicas", s.cfg.Replicas)
			break
		}
		if s.bg.Err() != nil {
			return
		}
		s.logger.Warn("log not open yet; retrying", "attempt", attempt, "err", err)
		select {
		case <-s.bg.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	if s.cfg.IdleExit > 0 {
		s.bgWG.Add(1)
		go s.watchIdle() // see idle.go
	}
	s.bgWG.Add(1)
	go s.keepMark() // see mark.go
	if s.cfg.RetentionEvery > 0 {
		s.bgWG.Add(1)
		go s.enforceRetention() // see retention.go
	}
	s.startProjectors()
}

// startProjectors starts the projectors of the config, if any.
func (s *Server) startProjectors() {
	if s.cfg.Projectors == nil {
		// Hook: the projections runtime (projections/) is not wired yet;
		// the spl serve command passes its projectors here.
		return
	}
	ps, err := s.cfg.Projectors(s.c.Load())
	if err != nil {
		s.logger.Error("projectors not started", "err", err)
		return
	}
	s.projMu.Lock()
	s.projectors = ps
	s.projMu.Unlock()
	for _, p := range ps {
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			s.logger.Info("projector started", "projection", p.Name())
			for {
				err := p.Run(s.bg)
				if s.bg.Err() != nil {
					s.logger.Info("projector stopped", "projection", p.Name(), "position", p.Position())
					return
				}
				s.logger.Error("projector failed; restarting", "projection", p.Name(), "err", err)
				select {
				case <-s.bg.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
}

// Ready is closed once the log is open and appends are accepted.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Client is the server's log, or nil before Ready.
func (s *Server) Client() *sdk.Client { return s.c.Load() }

// NATSURL is the URL clients connect to: nats://host:port of the client
// listener.
func (s *Server) NATSURL() string {
	if s.ns == nil {
		return ""
	}
	return "nats://" + s.ns.Addr().String()
}

// ClusterAddr is the route listener's address, "" outside a cluster.
func (s *Server) ClusterAddr() string {
	if s.ns == nil || s.ns.ClusterAddr() == nil {
		return ""
	}
	return s.ns.ClusterAddr().String()
}

// HTTPAddr is the HTTP API's host:port, "" when it is off.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// Shutdown stops the server gracefully: new appends are refused (503),
// SSE tails end, requests in flight finish, projectors stop, the log's
// writer drains (every acknowledged record is on disk), and the NATS
// server shuts down. ctx bounds the wait for HTTP requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.started {
		return nil
	}
	s.shutOnce.Do(func() {
		s.stopping.Store(true)
		s.logger.Info("shutting down")
		s.dir.Withdraw()
		var errs []error
		s.tailStop()
		if s.httpSrv != nil {
			if err := s.httpSrv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
				_ = s.httpSrv.Close()
			}
		}
		if s.door != nil {
			s.door.stop()
		}
		s.bgCancel()
		s.bgWG.Wait()
		if c := s.c.Load(); c != nil {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close log: %w", err))
			}
		}
		s.stopNATS()
		s.shutErr = errors.Join(errs...)
		s.logger.Info("stopped", "err", s.shutErr)
	})
	return s.shutErr
}

func (s *Server) stopNATS() {
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	}
	s.dir.Release()
}

// natsLogger writes nats-server's log through slog, and hands each error
// to errored (nil: none).
type natsLogger struct {
	l       *slog.Logger
	errored func(msg string)
}

func (n natsLogger) Noticef(format string, v ...any) { n.l.Info(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }

func (n natsLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	n.l.Error(msg)
	if n.errored != nil {
		n.errored(msg)
	}
}

func (n natsLogger) Debugf(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Tracef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
