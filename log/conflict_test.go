package log

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// racingDialer dials addr and wraps the connection so that, each time the
// connection is about to send a message to a subject that starts with
// subject, race runs first.
type racingDialer struct {
	addr    string
	subject []byte // " spl.rec.<thread-token>.": what a PUB or HPUB of the thread holds
	race    func()
}

func (d *racingDialer) Dial(network, _ string) (net.Conn, error) {
	c, err := net.Dial(network, d.addr)
	if err != nil {
		return nil, err
	}
	return &racingConn{Conn: c, d: d}, nil
}

type racingConn struct {
	net.Conn
	d *racingDialer
}

func (c *racingConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.d.subject) {
		c.d.race()
	}
	return c.Conn.Write(p)
}

// startServer runs a NATS server with JetStream for the test and returns
// its host:port.
func startServer(t *testing.T) string {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.Addr().String()
}

// TestConflictAfterEveryRetry checks that an append that loses the race
// for its thread on every attempt fails with ErrConflict (and
// ErrExpectation), and appends nothing: before each of its sends, another
// log appends to the same thread.
func TestConflictAfterEveryRetry(t *testing.T) {
	addr := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other, err := Open(ctx, Options{URL: "nats://" + addr, Name: "other"})
	if err != nil {
		t.Fatalf("Open other: %v", err)
	}
	defer other.Close()
	const thread = "th_conflict"
	races := 0
	d := &racingDialer{addr: addr, subject: []byte(" spl.rec." + thread + "."), race: func() {
		races++
		if _, err := other.Append(ctx, newRec(t, thread, "agent.step", map[string]any{"race": races})); err != nil {
			t.Errorf("race %d: %v", races, err)
		}
	}}
	l, err := Open(ctx, Options{URL: "nats://" + addr, Name: "loser", NATSOptions: []nats.Option{nats.SetCustomDialer(d)}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()

	_, err = l.Append(ctx, newRec(t, thread, "agent.step", map[string]any{"lost": true}))
	if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrExpectation) {
		t.Fatalf("Append: %v, want an error wrapping ErrConflict and ErrExpectation", err)
	}
	if got, want := races, maxAttempts+1; got != want {
		t.Errorf("sends=%d, want %d", got, want)
	}
	es, err := other.Tail(ctx, thread, 1000)
	if err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if got, want := len(es), races; got != want {
		t.Errorf("records on the thread=%d, want %d (only the other log's)", got, want)
	}
}
