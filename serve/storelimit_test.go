package serve

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestStoreLimitRaised: the storage limit that spl sets at start can be
// raised while the server runs, whatever the NATS listener's
// authentication, and a limit the config sets is left alone.
func TestStoreLimitRaised(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"directory token", Config{}},
		{"users", Config{User: "agent", Password: "pw-123456"}},
		{"no auth", Config{InsecureNoAuth: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.cfg)
			info, err := s.ns.Jsz(nil)
			if err != nil {
				t.Fatal(err)
			}
			cur := info.Config.MaxStore
			if cur <= 0 || cur >= 1<<50 {
				t.Fatalf("storage limit at start %d, want the disk's (set by spl, not left to nats-server)", cur)
			}
			// A client connected with the server's own credentials
			// stays connected through the reload: a disconnected one
			// waits 2 s before it connects again.
			var dropped atomic.Int32
			nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(s.ns),
				nats.DisconnectErrHandler(func(*nats.Conn, error) { dropped.Add(1) })}, s.own...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if err := s.setStoreLimit(cur + 3<<20); err != nil {
				t.Fatalf("raise the storage limit: %v", err)
			}
			if err := nc.Flush(); err != nil || dropped.Load() != 0 {
				t.Fatalf("a client was disconnected by the reload (flush: %v, disconnects: %d)", err, dropped.Load())
			}
			if info, err = s.ns.Jsz(nil); err != nil {
				t.Fatal(err)
			}
			if got := info.Config.MaxStore; got != cur+3<<20 {
				t.Fatalf("storage limit %d after raising %d by 3 MiB", got, cur)
			}
			// Appends still work after the reload.
			if code := call(t, "POST", base(s)+"/v1/records", emitBody("th_limit", "DO", "agent.step", `{"n":1}`), nil); code != 201 {
				t.Fatalf("append after the reload: %d", code)
			}
		})
	}
}

// TestStoreLimitLeftFarFromIt: a store far from its limit gets no raise,
// however much space is freed, since a raise reloads the server's
// options, which nats-server reads in places without their lock. Space
// freed once the store nears its limit is TestServeDiskFreed's (e2e).
func TestStoreLimitLeftFarFromIt(t *testing.T) {
	dir := t.TempDir()
	// 32 MiB taken before the server starts and freed after: without
	// the condition, the next look at the disk would raise the limit.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 32<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Dir: dir})
	info, err := s.ns.Jsz(nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := info.Config.MaxStore
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if want := storeLimitTarget(dir, int64(info.Store)); want < cur+storeLimitSlack {
		t.Skipf("the disk allows no raise (%d, limit %d): another process took the space freed", want, cur)
	}
	s.raiseStoreLimit()
	if info, err = s.ns.Jsz(nil); err != nil {
		t.Fatal(err)
	}
	if got := info.Config.MaxStore; got != cur {
		t.Fatalf("storage limit %d after a look at the disk, was %d: raised for a store of %d bytes", got, cur, info.Store)
	}
}
