package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// jsPeer is raw JetStream, the floor: an embedded nats-server of its own,
// started the way spl's embedded log starts its server (in process,
// SyncAlways, in-process client connection), with the stream spl
// provisions (subjects spl.rec.>, file storage, direct gets, atomic
// publish), and the same envelope bytes published under the same subjects
// with a synchronous publish each. No records layer: no chain, no group
// commit, no decoding or verification on read.
type jsPeer struct {
	root string
}

var _ Peer = (*jsPeer)(nil)

// Name implements Peer.
func (p *jsPeer) Name() string { return "jetstream" }

func (p *jsPeer) dir(loc string) string { return filepath.Join(p.root, loc) }

// streamConfig is the stream spl's log provisions.
func streamConfig() jetstream.StreamConfig {
	return splog.StreamConfig(splog.DefaultStream, 1)
}

// start starts the server of loc (SyncAlways unless noSync) and connects
// in process.
func (p *jsPeer) start(ctx context.Context, loc string, noSync bool) (*jsStore, error) {
	// The very server spl's embedded log runs, on the same options.
	opts := natsio.EmbeddedServerOptions(p.dir(loc), !noSync)
	opts.ServerName = "bench-jetstream"
	srv, err := natsio.StartServer(opts, nil)
	if err != nil {
		return nil, fmt.Errorf("jetstream server: %w", err)
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("bench"))
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("jetstream connect: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s, err := js.CreateOrUpdateStream(ctx, streamConfig())
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, fmt.Errorf("jetstream stream: %w", err)
	}
	return &jsStore{srv: srv, nc: nc, js: js, s: s}, nil
}

// Open implements Peer.
func (p *jsPeer) Open(ctx context.Context, loc string) (Store, error) {
	return p.start(ctx, loc, false)
}

// Fill implements Peer: async publishes to a server without SyncAlways
// (a million single-message fsyncs would take minutes and are not what
// is measured; the files are the same), then a clean shutdown.
func (p *jsPeer) Fill(ctx context.Context, loc string, plan *Plan) error {
	st, err := p.start(ctx, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	ts := time.Now()
	for i := range plan.Records {
		cp := content(i, int(plan.Step[i]))
		msg, err := rawMessage(threadName(int(plan.Thread[i])), &cp, ts)
		if err != nil {
			return fmt.Errorf("fill record %d: %w", i, err)
		}
		if _, err := st.js.PublishMsgAsync(msg, jetstream.WithStallWait(time.Minute)); err != nil {
			return fmt.Errorf("fill record %d: %w", i, err)
		}
	}
	select {
	case <-st.js.PublishAsyncComplete():
	case <-ctx.Done():
		return fmt.Errorf("fill: %w", ctx.Err())
	}
	return nil
}

// ColdOpen implements Peer: start the server (which recovers the stream),
// connect, and get the last message of the probe thread's checkpoints.
func (p *jsPeer) ColdOpen(ctx context.Context, loc, probe string) (Store, time.Duration, error) {
	t0 := time.Now()
	st, err := p.start(ctx, loc, false)
	if err != nil {
		return nil, 0, err
	}
	if _, err := st.Latest(ctx, probe); err != nil {
		st.Close()
		return nil, 0, fmt.Errorf("first read: %w", err)
	}
	return st, time.Since(t0), nil
}

// DiskBytes implements Peer.
func (p *jsPeer) DiskBytes(_ context.Context, loc string) (int64, string, error) {
	n, err := du(filepath.Join(p.dir(loc), "jetstream"))
	return n, "du of the server's store directory", err
}

// Remove implements Peer.
func (p *jsPeer) Remove(_ context.Context, loc string) error { return os.RemoveAll(p.dir(loc)) }

// rawMessage is the message spl would store for checkpoint c on thread,
// minus the chain (no prev): the envelope bytes, under the record's
// subject, with the Spl-Id header.
func rawMessage(thread string, c *records.Checkpoint, ts time.Time) (*nats.Msg, error) {
	r, err := records.New(records.ActLearn, records.KindCheckpoint, thread, actor, ts, c)
	if err != nil {
		return nil, err
	}
	data, err := r.Marshal()
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(splog.RecordSubject(thread, records.KindCheckpoint))
	msg.Data = data
	msg.Header.Set(splog.HeaderID, r.ID().String())
	return msg, nil
}

// jsStore is a running raw JetStream server and its connection.
type jsStore struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	s   jetstream.Stream

	mu   sync.Mutex
	msgs map[*records.Checkpoint]*nats.Msg // prepared write payloads
}

var (
	_ AsyncStore = (*jsStore)(nil)
	_ Preparer   = (*jsStore)(nil)
)

// Prepare implements Preparer: the envelope bytes of every write item are
// built before the clock starts, so that saves cost the publish only.
func (s *jsStore) Prepare(items []WriteItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = make(map[*records.Checkpoint]*nats.Msg, len(items))
	ts := time.Now()
	for _, it := range items {
		m, err := rawMessage(it.Thread, it.Content, ts)
		if err != nil {
			return err
		}
		s.msgs[it.Content] = m
	}
	return nil
}

func (s *jsStore) message(thread string, c *records.Checkpoint) (*nats.Msg, error) {
	s.mu.Lock()
	m := s.msgs[c]
	s.mu.Unlock()
	if m == nil {
		return rawMessage(thread, c, time.Now())
	}
	// A fresh Msg sharing the prepared data and (read-only) header.
	return &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}, nil
}

// Save implements Store: one synchronous publish, acked after the fsync.
func (s *jsStore) Save(ctx context.Context, _ int, thread string, c *records.Checkpoint) error {
	m, err := s.message(thread, c)
	if err != nil {
		return err
	}
	_, err = s.js.PublishMsg(ctx, m)
	return err
}

// SaveAsync implements AsyncStore: async publishes (at most 4,096 in
// flight), then awaiting every ack.
func (s *jsStore) SaveAsync(ctx context.Context, items []WriteItem, max int, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	var futs []jetstream.PubAckFuture
	n := 0
	for ; n < max && (n%256 != 0 || time.Now().Before(deadline)); n++ {
		it := items[n%len(items)]
		m, err := s.message(it.Thread, it.Content)
		if err != nil {
			return n, err
		}
		f, err := s.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
		if err != nil {
			return n, fmt.Errorf("publish async %d: %w", n, err)
		}
		futs = append(futs, f)
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-ctx.Done():
		return n, ctx.Err()
	}
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return n, fmt.Errorf("publish async %d: %w", i, err)
		}
	}
	return n, nil
}

// Latest implements Store: GetLastMsgForSubject (a direct get), not
// decoded: it returns a nil checkpoint.
func (s *jsStore) Latest(ctx context.Context, thread string) (*records.Checkpoint, error) {
	m, err := s.s.GetLastMsgForSubject(ctx, splog.RecordSubject(thread, records.KindCheckpoint))
	if err != nil {
		return nil, err
	}
	if len(m.Data) == 0 {
		return nil, errors.New("empty message")
	}
	return nil, nil
}

// Last implements Store: spl's window algorithm (the last message of the
// thread, then batched direct gets over a window back from it that grows
// fourfold until it holds n), without decoding.
func (s *jsStore) Last(ctx context.Context, thread string, n int) (int, error) {
	ms, err := lastN(ctx, s.nc, splog.DefaultStream, splog.ThreadSubject(thread), n)
	return len(ms), err
}

// Recent implements Store: a walk back from the end of the stream, thread
// tokens taken from the subjects, nothing decoded.
func (s *jsStore) Recent(ctx context.Context, n int) ([]string, error) {
	return recentThreads(ctx, s.nc, splog.DefaultStream, n, func(m *nats.Msg, _ uint64) (string, error) {
		tok := subjectToken(m.Header.Get("Nats-Subject"), 2)
		if tok == "" {
			return "", fmt.Errorf("bad subject %q", m.Header.Get("Nats-Subject"))
		}
		return tok, nil
	})
}

// Scan implements Store: every message through an ordered consumer,
// counted, not decoded.
func (s *jsStore) Scan(ctx context.Context) (int, error) {
	return scanStream(ctx, s.js, splog.DefaultStream, func(string, uint64, nats.Header, []byte) {})
}

// Close implements Store.
func (s *jsStore) Close() error {
	s.nc.Close()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}
