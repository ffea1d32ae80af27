package serve

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// dirSecret reads a secret spl serve keeps in its data directory.
func dirSecret(t *testing.T, s *Server, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// natsLog opens the log over the server's NATS listener with token.
func natsLog(t *testing.T, s *Server, token string) (*natsio.Conn, *log.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := natsio.Dial(ctx, natsio.Options{URL: s.NATSURL(), Timeout: 5 * time.Second, NATSOptions: []nats.Option{nats.Token(token)}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(conn.Close)
	l, err := log.On(ctx, conn, log.Options{Timeout: 5 * time.Second, NoMark: true})
	if err != nil {
		t.Fatalf("open the log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return conn, l
}

// appendNote appends a note to thread through l, timing it.
func appendNote(t *testing.T, l *log.Log, thread string) (time.Duration, error) {
	t.Helper()
	rec, err := records.New(records.ActSay, "note.text", thread, "did:sync:agent:nats", time.Now(), map[string]any{"text": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = l.Append(ctx, rec)
	return time.Since(start), err
}

// binding is the record binding actor to a fresh key.
func binding(t *testing.T) *records.Record {
	t.Helper()
	_, did, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New(records.ActKnow, records.KindActorKey, records.ActorThread, "did:sync:admin", time.Now(),
		&records.ActorKey{Actor: "did:sync:agent:bound", PublicKey: did})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// The NATS listener's three rights, as a second user holding one token
// would try them: the read token reads and changes nothing (no publish
// into the stream, no purge, no delete: the attacks of the security
// review); the write token writes records but neither actor key bindings
// nor the stream's deletion; the admin token binds keys. A denied append
// fails at once with log.ErrForbidden, not after its timeout.
func TestNATSRights(t *testing.T) {
	s := start(t, Config{})
	if code := call(t, "POST", base(s)+"/v1/records", emitBody("th_rights", "SAY", "note.text", `{"text":"before"}`), nil); code != 201 {
		t.Fatalf("emit: %d", code)
	}
	read, write, admin := dirSecret(t, s, ReadTokenFile), dirSecret(t, s, natsio.TokenFile), dirSecret(t, s, AdminTokenFile)
	if read == write || write == admin || read == admin {
		t.Fatal("the three tokens are not distinct")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Read: the record's body comes back, by direct get.
	rconn, rlog := natsLog(t, s, read)
	got, err := rlog.Head(ctx, "th_rights")
	if err != nil || !strings.Contains(string(got.Record.Body), "before") {
		t.Fatalf("read token: last record %v, %v", got.Record, err)
	}
	// ... and nothing else.
	if d, err := appendNote(t, rlog, "th_rights"); !errors.Is(err, log.ErrForbidden) || d > 3*time.Second {
		t.Fatalf("read token appended: %v after %v, want ErrForbidden at once", err, d)
	}
	stream, err := rconn.JS.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatalf("read token: stream info: %v", err)
	}
	before, _ := stream.Info(ctx)
	short, stop := context.WithTimeout(ctx, time.Second)
	if _, err := rconn.JS.Publish(short, log.RecordSubject("th_rights", "note.text"), []byte("raw bytes")); err == nil {
		t.Error("read token published raw bytes into the stream")
	}
	stop()
	short, stop = context.WithTimeout(ctx, time.Second)
	if err := stream.Purge(short); err == nil {
		t.Error("read token purged the stream")
	}
	stop()
	short, stop = context.WithTimeout(ctx, time.Second)
	if err := rconn.JS.DeleteStream(short, log.DefaultStream); err == nil {
		t.Error("read token deleted the stream")
	}
	stop()
	short, stop = context.WithTimeout(ctx, time.Second)
	if _, err := rconn.JS.CreateOrUpdateConsumer(short, log.DefaultStream, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}); err == nil {
		t.Error("read token created a consumer")
	}
	stop()

	// Write: records, not bindings, not the stream's deletion.
	wconn, wlog := natsLog(t, s, write)
	if _, err := appendNote(t, wlog, "th_rights"); err != nil {
		t.Fatalf("write token: append: %v", err)
	}
	start := time.Now()
	if _, err := wlog.Append(ctx, binding(t)); !errors.Is(err, log.ErrForbidden) || time.Since(start) > 3*time.Second {
		t.Fatalf("write token bound a key: %v after %v, want ErrForbidden at once", err, time.Since(start))
	}
	short, stop = context.WithTimeout(ctx, time.Second)
	if err := wconn.JS.DeleteStream(short, log.DefaultStream); err == nil {
		t.Error("write token deleted the stream")
	}
	stop()
	after, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.State.Msgs+1 {
		t.Errorf("stream holds %d messages, want %d: the write token's one append alone", after.State.Msgs, before.State.Msgs+1)
	}

	// Admin: bindings.
	_, alog := natsLog(t, s, admin)
	if _, err := alog.Append(ctx, binding(t)); err != nil {
		t.Fatalf("admin token: bind a key: %v", err)
	}
}

// Over HTTP as over NATS: the write token cannot bind an actor's key, the
// admin token can; both are refused what the read token is.
func TestHTTPAdminRight(t *testing.T) {
	s := start(t, Config{})
	_, did, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	write, read, admin := dirSecret(t, s, natsio.TokenFile), dirSecret(t, s, ReadTokenFile), dirSecret(t, s, AdminTokenFile)
	post := func(path, token, body string) (int, wire.Error) {
		req, err := http.NewRequest("POST", base(s)+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		var e wire.Error
		code, _ := callReq(t, http.DefaultClient, req, &e)
		return code, e
	}
	bind := emitBody(records.ActorThread, "KNOW", records.KindActorKey, `{"actor":"did:sync:agent:bound","public_key":"`+did+`"}`)
	for _, tok := range []string{write, read} {
		if code, e := post("/v1/records", tok, bind); code != http.StatusForbidden || !strings.Contains(e.Rule, "right") {
			t.Fatalf("binding a key without the admin token: %d %+v, want 403 naming the right", code, e)
		}
	}
	var rec wire.Record
	req, _ := http.NewRequest("POST", base(s)+"/v1/records", strings.NewReader(bind))
	req.Header.Set("Authorization", "Bearer "+admin)
	if code, _ := callReq(t, http.DefaultClient, req, &rec); code != http.StatusCreated {
		t.Fatalf("admin token binding a key: %d, want 201", code)
	}
	// Erasing the binding takes the admin right too.
	erase := `{"ids":["` + rec.ID + `"],"reason":"user request","actor":"did:sync:admin"}`
	path := "/v1/threads/" + url.PathEscape(records.ActorThread) + "/erase"
	if code, e := post(path, write, erase); code != http.StatusForbidden || e.Rule != "needs the admin right" {
		t.Fatalf("write token erasing a binding: %d %+v, want 403 needing the admin right", code, e)
	}
	if code, e := post(path, admin, erase); code != http.StatusOK {
		t.Fatalf("admin token erasing a binding: %d %+v, want 200", code, e)
	}
}

// Under RequireSigned a NATS client with the write token cannot publish
// records at all: they would skip the signature check of the service
// layer, which HTTP writes go through.
func TestRequireSignedNATS(t *testing.T) {
	s := start(t, Config{RequireSigned: true})
	_, wlog := natsLog(t, s, dirSecret(t, s, natsio.TokenFile))
	if d, err := appendNote(t, wlog, "th_unsigned"); !errors.Is(err, log.ErrForbidden) || d > 3*time.Second {
		t.Fatalf("write token appended over NATS under RequireSigned: %v after %v, want ErrForbidden at once", err, d)
	}
}
