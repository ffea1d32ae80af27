package log

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Files in a data directory. The JetStream store lives in jetstream/; the
// process that holds the exclusive lock on lock runs the embedded server and
// writes its address to server.json; token authenticates every process that
// can read the directory.
const (
	lockFile   = "lock"
	addrFile   = "server.json"
	tokenFile  = "token"
	maxPayload = 8 << 20
)

// embedded is the in-process NATS server of a data directory, or the handle
// on the one another process runs there.
//
// Exactly one process serves a data directory at a time: the one holding an
// flock on dir/lock. The others join it over loopback TCP. If the serving
// process goes away, a joined process takes its place the next time its
// connection dials (see dial), so a long-lived client survives the exit of
// the process that happened to start the server.
type embedded struct {
	dir    string
	token  string
	linger time.Duration

	mu     sync.Mutex
	lock   *DirLock       // held while this process serves
	srv    *server.Server // running server, when this process serves
	closed bool
}

func newEmbedded(dir string, linger time.Duration) (*embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	token, err := loadToken(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, err
	}
	return &embedded{dir: dir, token: token, linger: linger}, nil
}

// loadToken reads the directory's client token, creating it on first use.
func loadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return string(b), nil
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Another process created it first: use theirs.
		for range 50 {
			if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
				return string(b), nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return "", fmt.Errorf("read token %s: incomplete", path)
	}
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	if _, err := f.WriteString(tok); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// connect returns a connection to the directory's server, starting one in
// this process if no other process serves the directory.
func (e *embedded) connect(ctx context.Context, name string) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.Token(e.token),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
	}
	var lastErr error
	for {
		url, err := e.ensureServing()
		if err != nil {
			return nil, err
		}
		var nc *nats.Conn
		if url != "" {
			// This process serves the directory: talk to it in-process.
			nc, err = nats.Connect("", append(opts, nats.InProcessServer(e.server()))...)
		} else {
			// The URL is a placeholder: Dial resolves the live address.
			nc, err = nats.Connect("nats://127.0.0.1:4222", append(opts, nats.SetCustomDialer(e))...)
		}
		if err == nil {
			return nc, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to embedded server in %s: %w (last error: %v)", e.dir, ctx.Err(), lastErr)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (e *embedded) server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// Dial implements nats.CustomDialer. It connects to the process serving the
// directory, and becomes that process when nobody does.
func (e *embedded) Dial(network, _ string) (net.Conn, error) {
	deadline := time.Now().Add(2 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		if url, err := e.ensureServing(); err != nil {
			lastErr = err
		} else if url != "" {
			c, err := net.DialTimeout(network, url, time.Second)
			if err == nil {
				return c, nil
			}
			lastErr = err
		} else if info, err := readAddr(e.dir); err == nil && info.URL != "" {
			c, err := net.DialTimeout(network, info.URL, time.Second)
			if err == nil {
				return c, nil
			}
			lastErr = err
		} else {
			lastErr = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lastErr == nil {
		lastErr = errors.New("no server")
	}
	return nil, fmt.Errorf("dial embedded server in %s: %w", e.dir, lastErr)
}

// ensureServing starts the server in this process if the directory's lock
// is free, and returns its address. It returns "" when another process
// serves the directory.
func (e *embedded) ensureServing() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return "", ErrClosed
	}
	if e.srv != nil {
		return e.srv.Addr().String(), nil
	}
	lock, err := LockDir(e.dir)
	if errors.Is(err, ErrDirInUse) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	srv, err := e.start()
	if err != nil {
		lock.Release()
		return "", err
	}
	addr := srv.Addr().String()
	if err := lock.Publish(addr); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		lock.Release()
		return "", err
	}
	e.lock, e.srv = lock, srv
	return addr, nil
}

// EmbeddedServerOptions are the options of the server a data directory's
// embedded log runs: JetStream with its store in dir/jetstream, fsync
// before every ack unless syncAlways is false, a random loopback port, no
// signal handlers, no logs. The embedded log adds its token. Exported so
// that a benchmark's raw JetStream peer runs the very same server.
func EmbeddedServerOptions(dir string, syncAlways bool) *server.Options {
	return &server.Options{
		ServerName:            "spl-embedded",
		Host:                  "127.0.0.1",
		Port:                  -1,
		JetStream:             true,
		StoreDir:              dir, // the server keeps its store in <dir>/jetstream
		SyncAlways:            syncAlways,
		NoSigs:                true,
		NoLog:                 true,
		MaxPayload:            maxPayload,
		DisableShortFirstPing: true,
	}
}

func (e *embedded) start() (*server.Server, error) {
	// Without SyncAlways: the writers of the processes on the directory
	// fsync the stream themselves, once per group commit (blockSyncer).
	opts := EmbeddedServerOptions(e.dir, false)
	opts.Authorization = e.token
	srv, err := StartServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	return srv, nil
}

// serverReady bounds how long a starting server may take to recover its
// store and take connections.
const serverReady = 60 * time.Second

// StartServer starts a nats-server with opts and waits until it takes
// connections. Exported, with EmbeddedServerOptions, so that a benchmark's
// raw JetStream peer starts the very server the embedded log starts.
func StartServer(opts *server.Options) (*server.Server, error) {
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(serverReady) {
		srv.Shutdown()
		return nil, fmt.Errorf("not ready within %s", serverReady)
	}
	return srv, nil
}

// close stops serving: the address is withdrawn so no new process joins,
// joined processes get up to the linger time to finish, then the server
// shuts down and the lock is released.
func (e *embedded) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.srv == nil {
		return
	}
	e.lock.Withdraw()
	deadline := time.Now().Add(e.linger)
	for e.srv.NumClients() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Release()
	e.srv, e.lock = nil, nil
}
