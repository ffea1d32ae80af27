package serve

import (
	"context"
	"encoding/json"
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
	// A read model's bucket, as the projectors keep them, for the puts
	// the other rights must be refused.
	aconn, alog := natsLog(t, s, admin)
	if _, err := aconn.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "SPL_index_threads"}); err != nil {
		t.Fatalf("admin token: create a bucket: %v", err)
	}

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
	attack(t, "read token", rconn)

	// Write: records through the door, not bindings, and nothing below
	// the service layer.
	wconn, wlog := natsLog(t, s, write)
	if !wlog.Door() {
		t.Fatal("write token: the log does not write through the door")
	}
	if _, err := appendNote(t, wlog, "th_rights"); err != nil {
		t.Fatalf("write token: append: %v", err)
	}
	start := time.Now()
	if _, err := wlog.Append(ctx, binding(t)); !errors.Is(err, sdk.ErrNeedsAdmin) || time.Since(start) > 3*time.Second {
		t.Fatalf("write token bound a key: %v after %v, want ErrNeedsAdmin at once", err, time.Since(start))
	}
	attack(t, "write token", wconn)
	after, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.State.Msgs+1 {
		t.Errorf("stream holds %d messages, want %d: the write token's one append alone", after.State.Msgs, before.State.Msgs+1)
	}
	if cfg := after.Config; cfg.MaxMsgs > 0 || len(cfg.Sources) > 0 || cfg.Mirror != nil {
		t.Errorf("stream configuration changed: %+v", cfg)
	}

	// Admin: bindings.
	if _, err := alog.Append(ctx, binding(t)); err != nil {
		t.Fatalf("admin token: bind a key: %v", err)
	}
}

// attack tries, with conn, what no right but the admin's may do below the
// service layer, and fails t for each that the server takes: raw bytes
// and an unchecked record published into the log, a purge, a stream
// edit that drops records or sources another stream, a stream created, a
// consumer, a message deleted, a value put into a read model's bucket.
func attack(t *testing.T, who string, conn *natsio.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	try := func(what string, f func(context.Context) error) {
		short, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		if err := f(short); err == nil {
			t.Errorf("%s: %s: allowed", who, what)
		}
	}
	rec, err := records.New(records.ActSay, "note.text", "th_rights", "did:sync:agent:nats", time.Now(), map[string]any{"text": "unchecked"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	stream, err := conn.JS.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatalf("%s: stream info: %v", who, err)
	}
	cfg := stream.CachedInfo().Config
	try("publish raw bytes into the log", func(ctx context.Context) error {
		_, err := conn.JS.Publish(ctx, log.RecordSubject("th_rights", "note.text"), []byte("raw bytes"))
		return err
	})
	try("publish a record past the service layer", func(ctx context.Context) error {
		_, err := conn.JS.Publish(ctx, log.RecordSubject("th_rights", "note.text"), data)
		return err
	})
	try("purge the stream", func(ctx context.Context) error { return stream.Purge(ctx) })
	try("purge one thread", func(ctx context.Context) error {
		return stream.Purge(ctx, jetstream.WithPurgeSubject(log.ThreadSubject("th_rights")))
	})
	try("delete a message", func(ctx context.Context) error { return stream.DeleteMsg(ctx, 1) })
	try("delete the stream", func(ctx context.Context) error { return conn.JS.DeleteStream(ctx, log.DefaultStream) })
	try("keep one message", func(ctx context.Context) error {
		c := cfg
		c.MaxMsgs = 1
		_, err := conn.JS.UpdateStream(ctx, c)
		return err
	})
	try("create a stream that sources the log", func(ctx context.Context) error {
		_, err := conn.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Sources: []*jetstream.StreamSource{{Name: log.DefaultStream}}})
		return err
	})
	try("create a consumer", func(ctx context.Context) error {
		_, err := conn.JS.CreateOrUpdateConsumer(ctx, log.DefaultStream, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		return err
	})
	buckets := 0
	for name := range conn.JS.KeyValueStoreNames(ctx).Name() {
		try("put into bucket "+name, func(ctx context.Context) error {
			kv, err := conn.JS.KeyValue(ctx, name)
			if err != nil {
				return err
			}
			_, err = kv.Put(ctx, "evil", []byte("x"))
			return err
		})
		buckets++
	}
	if buckets == 0 {
		t.Errorf("%s: no bucket listed to try a put into", who)
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

// Under RequireSigned a NATS client with the write token writes through
// the door, where the service layer checks every signature as it does
// over HTTP: an unsigned record is refused naming the actor, a record
// signed by its actor's key is stored.
func TestRequireSignedNATS(t *testing.T) {
	s := start(t, Config{RequireSigned: true})
	_, wlog := natsLog(t, s, dirSecret(t, s, natsio.TokenFile))
	var fe *records.FieldError
	if _, err := appendNote(t, wlog, "th_unsigned"); !errors.As(err, &fe) || fe.Field != "actor" {
		t.Fatalf("write token appended unsigned over NATS under RequireSigned: %v, want a refusal of field actor", err)
	}
	key, did, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New(records.ActSay, "note.text", "th_signed", did, time.Now(), map[string]any{"text": "signed"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Sign(key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := wlog.Append(ctx, rec)
	if err != nil {
		t.Fatalf("signed record over NATS: %v", err)
	}
	got, err := wlog.Head(ctx, "th_signed")
	if err != nil || got.ID != e.ID || got.Record.Sig == nil {
		t.Fatalf("head of th_signed: %+v, %v; want the signed record %s", got, err, e.ID)
	}
}

// A stream changed behind the log's back (here with the admin token, as
// an operator's slip would) is reported by /healthz, which answers 503
// naming the change, and refused by every log that opens on it.
func TestStreamChangedBehindItsBack(t *testing.T) {
	s := start(t, Config{})
	admin, write := dirSecret(t, s, AdminTokenFile), dirSecret(t, s, natsio.TokenFile)
	var h healthJSON
	if code := call(t, "GET", base(s)+"/healthz", "", &h); code != 200 || h.Status != "ok" {
		t.Fatalf("healthz before: %d %+v", code, h)
	}
	aconn, _ := natsLog(t, s, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := aconn.JS.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgs = 5
	if _, err := aconn.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("admin: edit the stream: %v", err)
	}
	if code := call(t, "GET", base(s)+"/healthz", "", &h); code != http.StatusServiceUnavailable || h.Status != "changed" || !strings.Contains(h.Error, "max_msgs 5") {
		t.Fatalf("healthz after the edit: %d %+v, want 503 changed naming max_msgs 5", code, h)
	}
	conn, err := natsio.Dial(ctx, natsio.Options{URL: s.NATSURL(), Timeout: 5 * time.Second, NATSOptions: []nats.Option{nats.Token(write)}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := log.On(ctx, conn, log.Options{Timeout: 5 * time.Second, NoMark: true}); !errors.Is(err, log.ErrStreamChanged) {
		t.Fatalf("open on the changed stream: %v, want ErrStreamChanged", err)
	}
}

// TestLossBehindTheDoor: a stream purged or deleted with the admin right
// is loss to a client of the door too, which keeps no mark of its own:
// its verify reports the clocks the server's mark held, an open of the
// deleted stream fails as loss (never as an empty log), and nothing
// recreates the stream.
func TestLossBehindTheDoor(t *testing.T) {
	s := start(t, Config{})
	admin, write := dirSecret(t, s, AdminTokenFile), dirSecret(t, s, natsio.TokenFile)
	_, l := natsLog(t, s, write)
	for i := 0; i < 3; i++ {
		if _, err := appendNote(t, l, "th_loss"); err != nil {
			t.Fatal(err)
		}
	}
	// The server's mark reaches the last append (it is written behind).
	deadline := time.Now().Add(15 * time.Second)
	for {
		var k log.Mark
		b, _ := os.ReadFile(filepath.Join(s.cfg.Dir, log.MarkFile))
		if json.Unmarshal(b, &k) == nil && k.Clock == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's mark never reached clock 3: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aconn, _ := natsLog(t, s, admin)
	stream, err := aconn.JS.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatalf("admin: purge: %v", err)
	}
	rep, err := l.VerifyAll(ctx, nil)
	if err != nil || rep.Loss == nil || rep.Loss.From != 1 || rep.Loss.To != 3 {
		t.Fatalf("verify of the purged log through the door: %+v, %v; want loss of clocks 1–3", rep.Loss, err)
	}
	if err := aconn.JS.DeleteStream(ctx, log.DefaultStream); err != nil {
		t.Fatalf("admin: delete the stream: %v", err)
	}
	var h healthJSON
	if code := call(t, "GET", base(s)+"/healthz", "", &h); code != http.StatusServiceUnavailable || h.Status != "loss" || h.Missing == nil || h.Missing.To != 3 {
		t.Fatalf("healthz of the deleted stream: %d %+v, want 503 loss to clock 3", code, h)
	}
	conn, err := natsio.Dial(ctx, natsio.Options{URL: s.NATSURL(), Timeout: 5 * time.Second, NATSOptions: []nats.Option{nats.Token(write)}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var loss *log.MarkLoss
	if _, err := log.On(ctx, conn, log.Options{Timeout: 5 * time.Second, NoMark: true}); !errors.Is(err, log.ErrLoss) || !errors.As(err, &loss) || loss.To != 3 {
		t.Fatalf("open of the deleted stream through the door: %v, want loss of clocks to 3", err)
	}
	if _, err := aconn.JS.Stream(ctx, log.DefaultStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the stream after the door's client opened: %v, want still gone", err)
	}
}
