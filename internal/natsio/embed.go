package natsio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/storekey"
)

// Files in a data directory. The JetStream store lives in jetstream/; the
// process that holds the exclusive lock on lock runs the embedded server and
// writes its address to server.json; token authenticates every process that
// can read the directory; encryption marks a store encrypted at rest
// (atrest.go).
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
	enc    Encryption // of the store: every process on the directory has its key

	mu     sync.Mutex
	lock   *DirLock       // held while this process serves
	srv    *server.Server // running server, when this process serves
	space  *spaceWatch    // restarts srv's JetStream after it met a full disk (outofspace.go)
	closed bool

	lostMu sync.Mutex
	lost   []func() // called when srv's JetStream restarted: the answers it owed are gone
}

// onRestart adds f to what a restart of the served JetStream calls.
func (e *embedded) onRestart(f func()) {
	e.lostMu.Lock()
	e.lost = append(e.lost, f)
	e.lostMu.Unlock()
}

func (e *embedded) restarted() {
	e.lostMu.Lock()
	lost := slices.Clone(e.lost)
	e.lostMu.Unlock()
	for _, f := range lost {
		f()
	}
}

func newEmbedded(dir string, linger time.Duration, keyFile string) (*embedded, error) {
	if err := OpenDir(dir); err != nil {
		return nil, err
	}
	enc, err := embeddedEncryption(keyFile)
	if err != nil {
		return nil, err
	}
	if err := keyOutside(enc.Key, dir); err != nil {
		return nil, err
	}
	token, err := loadToken(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, err
	}
	return &embedded{dir: dir, token: token, linger: linger, enc: enc}, nil
}

// embeddedEncryption is the encryption of the embedded store: the key in
// keyFile, else in the file SPL_ENCRYPTION_KEY_FILE names, else none.
func embeddedEncryption(keyFile string) (Encryption, error) {
	enc := Encryption{Hint: "set " + env.EncryptionKeyFileVar}
	name := keyFile
	if keyFile == "" {
		keyFile = env.EncryptionKeyFile()
		name = env.EncryptionKeyFileVar + "=" + keyFile
	}
	if keyFile == "" {
		return enc, nil
	}
	k, err := storekey.Load(keyFile)
	if err != nil {
		return enc, fmt.Errorf("%s: %w", name, err)
	}
	k.Name = name
	enc.Key = k
	return enc, nil
}

// loadToken returns the directory's client token, creating it on first
// use. The token file only ever appears whole (see writeToken). A file
// that holds no whole token is waited for a moment, in case a version
// that wrote it in place is writing it, then replaced (see replaceToken):
// it is what a crash between that version's create and write leaves, or a
// power loss before the token reached the disk.
func loadToken(path string) (string, error) {
	for range 5 {
		b, err := os.ReadFile(path)
		switch {
		case err == nil && wholeToken(b):
			return string(b), nil
		case errors.Is(err, fs.ErrNotExist):
			tok, err := writeToken(path, false)
			if errors.Is(err, fs.ErrExist) {
				continue // another process created it first: read theirs
			}
			return tok, err
		case err != nil:
			return "", fmt.Errorf("read token: %w", err)
		}
		for range 50 {
			time.Sleep(10 * time.Millisecond)
			if b, err := os.ReadFile(path); err == nil && wholeToken(b) {
				return string(b), nil
			}
		}
		tok, err := replaceToken(path)
		if tok != "" || err != nil {
			return tok, err
		}
		// Another process replaced it meanwhile: read theirs.
	}
	return "", fmt.Errorf("read token %s: no whole token after 5 tries", path)
}

// wholeToken reports whether b is a token as writeToken writes it: hex
// digits, at least 32. A power loss can leave a file of the right size
// that holds zeros.
func wholeToken(b []byte) bool {
	if len(b) < 32 {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// writeToken makes a new token and puts it at path whole: written to a
// temporary file in the same directory and synced, then given the name
// path, and the directory synced. With replace false, the name is given
// by a hard link, which fails (wrapping fs.ErrExist) when path exists:
// of two processes creating the token, the first wins and the other
// reads the winner's. With replace true, by a rename over path. Either
// way path never names a partial token, not even after a crash; a crash
// can leave a temporary file behind, which nothing reads.
func writeToken(path string, replace bool) (string, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tokenFile+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	defer os.Remove(f.Name()) // linked or renamed by then, or a failure's
	_, err = f.WriteString(tok)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	if replace {
		err = os.Rename(f.Name(), path)
	} else {
		err = os.Link(f.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := SyncFile(dir); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// replaceToken replaces the file at path, which holds no whole token, with
// a new token, and returns it. It returns "" and no error when the name
// no longer holds the file it saw: the caller reads it again.
//
// Processes that race to replace the file must all end with the same
// token. Each opens the file and takes an flock on it, then replaces it
// only if path still names the file it locked and that file still holds
// no whole token. The first to get the lock renames a whole token over
// path. The others get the lock on the file the rename unlinked, see that
// path names another file now, and read that one. A process that opens
// path after the rename finds the whole token and locks nothing. Nothing
// else changes the name: a creator links, which fails while the name
// exists. The kernel drops an flock when its process dies, so a crash
// never leaves the token locked.
func replaceToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("replace token: %w", err)
	}
	defer f.Close() // and with it the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("replace token: lock: %w", err)
	}
	locked, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("replace token: %w", err)
	}
	named, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(locked, named) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("replace token: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("replace token: %w", err)
	}
	if wholeToken(b) {
		return string(b), nil
	}
	return writeToken(path, true)
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
		// Another process serves the directory: join it, if its store
		// is encrypted as this process expects.
		return "", checkJoin(e.dir, e.enc.Key, e.enc.Hint)
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
	if err := lock.Publish(addr); err != nil && !errors.Is(err, syscall.ENOSPC) {
		e.space.stop()
		srv.Shutdown()
		srv.WaitForShutdown()
		lock.Release()
		return "", err
	}
	// On a full disk the address cannot be published: this process serves
	// itself alone, so that reads still work, and processes that arrive
	// meanwhile wait for the lock (faults.md, "disk full").
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
		ServerName: "spl-embedded",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir, // the server keeps its store in <dir>/jetstream
		// Left unset, the limit is 75% of the disk space free when the
		// server starts plus 75% of what the store holds, frozen until
		// the next start: started on a full disk, the server refuses
		// every append ("insufficient resources") even after space is
		// freed, and until then reads nothing back (faults.md, "disk
		// full"). The file system is the limit: an append that does not
		// fit fails with ENOSPC, which the log reports as ErrDiskFull.
		JetStreamMaxStore:     server.JetStreamMaxStoreDefault << 10, // 1 PiB
		SyncAlways:            syncAlways,
		NoSigs:                true,
		NoLog:                 true,
		MaxPayload:            maxPayload,
		DisableShortFirstPing: true,
	}
}

func (e *embedded) start() (*server.Server, error) {
	// Without SyncAlways: the writers of the processes on the directory
	// fsync the stream themselves, once per group commit (BlockSyncer).
	opts := EmbeddedServerOptions(e.dir, false)
	opts.Authorization = e.token
	// The key before anything touches the store (atrest.go).
	check, err := OpenStore(e.dir, e.enc, opts)
	if err != nil {
		return nil, err
	}
	// No server runs on the directory: finish on disk the secure deletes
	// that a killed one left half done (scrub.go).
	if err := scrub(e.dir); err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	w := newSpaceWatch(e.restarted)
	srv, err := StartServer(opts, spaceLogger{full: w.full})
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	if err := check.Started(srv); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, err
	}
	e.space = w
	go w.run(srv, opts)
	return srv, nil
}

// serverReady bounds how long a starting server may take to recover its
// store and take connections.
const serverReady = 60 * time.Second

// StartServer starts a nats-server with opts, logging to logger (none
// when nil), and waits until it takes connections: the embedded log's
// server, spl serve's, and a benchmark's raw JetStream peer, which so runs
// the very server the embedded log starts.
//
// A server that cannot start (a port taken, a store it cannot open)
// says so through its logger's Fatalf and goes on as if nothing had
// happened; StartServer stops it and returns that message at once,
// rather than waiting out serverReady for a listener that never comes.
func StartServer(opts *server.Options, logger server.Logger) (*server.Server, error) {
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	fl := &fatalLogger{next: logger, fatal: make(chan string, 1)}
	srv.SetLoggerV2(fl, false, false, false)
	srv.Start()
	deadline := time.Now().Add(serverReady)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-fl.fatal:
			srv.Shutdown()
			return nil, errors.New(msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return nil, fmt.Errorf("not ready within %s", serverReady)
		}
	}
	return srv, nil
}

// fatalLogger passes a server's log on to next (nowhere when nil), and
// keeps the first fatal message for StartServer.
type fatalLogger struct {
	next  server.Logger
	fatal chan string
}

func (l *fatalLogger) Fatalf(format string, v ...any) {
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
	if l.next != nil {
		l.next.Fatalf(format, v...)
	}
}

func (l *fatalLogger) Noticef(format string, v ...any) {
	if l.next != nil {
		l.next.Noticef(format, v...)
	}
}

func (l *fatalLogger) Warnf(format string, v ...any) {
	if l.next != nil {
		l.next.Warnf(format, v...)
	}
}

func (l *fatalLogger) Errorf(format string, v ...any) {
	if l.next != nil {
		l.next.Errorf(format, v...)
	}
}

func (l *fatalLogger) Debugf(format string, v ...any) {
	if l.next != nil {
		l.next.Debugf(format, v...)
	}
}

func (l *fatalLogger) Tracef(format string, v ...any) {
	if l.next != nil {
		l.next.Tracef(format, v...)
	}
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
	e.space.stop()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Release()
	e.srv, e.lock = nil, nil
}
