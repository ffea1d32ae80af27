package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
)

// TestServeDiskFull: spl serve on a 20 MiB tmpfs, 16 writers append over
// TCP until the disk is full. Appends are then refused (or end in
// doubt), never acknowledged and lost: after the server is killed, the
// file system grown and the server started again, every acknowledged
// record is in the log, and appends work again.
func TestServeDiskFull(t *testing.T) {
	needFaults(t)
	mnt := mountSmall(t, "20m")
	dir := filepath.Join(mnt, "spl")
	port := freePort(t)
	srv := newNode(t, "serve", "--home", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--request-timeout", "2s")
	srv.start()
	srv.wait(30 * time.Second)

	// Two writer connections of 8 callers each: their appends go out in
	// group commits of several records (atomic batches), as the HTTP
	// API's do.
	const writers = 16
	var as []*appender
	for w := range writers {
		thread := fmt.Sprintf("full-w%d", w)
		if w%8 == 0 {
			as = append(as, newAppender(t, natsURL(port), thread, 1))
			continue
		}
		base := as[len(as)-1]
		as = append(as, base.share(thread))
	}
	halt := startWriters(as)
	defer halt()
	// Until every writer is refused (the disk is full), within 60 s.
	deadline := time.Now().Add(60 * time.Second)
	for {
		full := 0
		for _, a := range as {
			a.mu.Lock()
			if a.fails > 0 {
				full++
			}
			a.mu.Unlock()
		}
		if full == writers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the disk did not fill up in 60s; server stderr:\n%s", srv.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // keep pushing against the full disk
	halt()
	acked := 0
	for _, a := range as {
		acked += a.acks()
		a.mu.Lock()
		t.Logf("%s: %d acknowledged, %d refused; first refusal: %v", a.thread, a.count, a.fails, a.firstErr)
		a.mu.Unlock()
	}

	// Killed and started again on the full disk: every acknowledged
	// record is there.
	srv.kill()
	srv.start()
	srv.wait(60 * time.Second)
	func() {
		checker := newAppender(t, natsURL(port), "full-check", 1)
		for _, a := range as {
			a.check(t, checker.l)
		}
	}()

	// And again once the disk has room; appends work again.
	srv.kill()
	if out, err := exec.Command("mount", "-o", "remount,size=60m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	srv.start()
	srv.wait(60 * time.Second)
	checker := newAppender(t, natsURL(port), "full-check", 1)
	for _, a := range as {
		a.check(t, checker.l)
	}
	checker.run(nil, 3) // appends work again
	t.Logf("%d appends acknowledged before the disk was full, none lost", acked)
}

// TestServeDiskFreed: spl serve started on a full disk refuses appends,
// and takes them again once space is freed, without a restart: its
// storage limit follows the disk (serve/storelimit.go).
func TestServeDiskFreed(t *testing.T) {
	needFaults(t)
	mnt := mountSmall(t, "40m")
	dir := filepath.Join(mnt, "spl")
	port := freePort(t)
	srv := newNode(t, "serve", "--home", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--request-timeout", "2s")
	srv.start()
	srv.wait(30 * time.Second)
	a := newAppender(t, natsURL(port), "freed", 1)
	a.run(nil, 10)
	if a.acks() != 10 {
		t.Fatalf("%d of 10 appends acknowledged on an empty disk: %v", a.acks(), a.firstErr)
	}
	// The server goes once its projector has indexed them, as a server
	// that ran for a while does: its read-model buckets then hold
	// superseded revisions, in files that nats-server no longer counts
	// as used. A storage limit set at the next start from the size of
	// the store's files leaves room that the full disk lacks, and a
	// server that meets ENOSPC takes no more writes to the stream until
	// it restarts. Killed before the projector caught up, the store is
	// smaller, and the test passed or failed as the projector lagged.
	waitProjected(t, a, 10)
	a.l.Close()
	a.conn.Close()
	srv.kill()

	filler := fill(t, mnt)
	srv.start()
	srv.wait(60 * time.Second)
	a = newAppender(t, natsURL(port), "freed", 1)
	rec, err := records.New(records.ActDo, "agent.step", "freed", "did:sync:agent:fault", time.Now(), map[string]any{"n": 10})
	if err != nil {
		t.Fatal(err)
	}
	// What still fits in the store's last pages may land; then appends
	// are refused.
	refused := false
	for n := 0; n < 1000 && !refused; n++ {
		if _, err := a.append(rec); err != nil {
			refused = true
			t.Logf("on a full disk, after %d more appends: %v", n, err)
		}
		if rec, err = records.New(records.ActDo, "agent.step", "freed", "did:sync:agent:fault", time.Now(), map[string]any{"n": 11 + n}); err != nil {
			t.Fatal(err)
		}
	}
	if !refused {
		t.Fatal("1000 appends acknowledged on a full disk")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for {
		_, err := a.append(rec)
		if err == nil {
			break
		}
		if time.Since(freed) > 20*time.Second {
			t.Fatalf("appends still refused 20s after space was freed, the server not restarted: %v\nserver stderr:\n%s", err, srv.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("appends taken again %v after space was freed", time.Since(freed).Round(time.Millisecond))
}

// waitProjected waits until the server's projector has applied every
// record up to clock, read through a's connection.
func waitProjected(t *testing.T, a *appender, clock uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := projections.New(ctx, a.conn, a.l, projections.Index(), projections.Options{})
	if err != nil {
		t.Fatalf("projections: %v", err)
	}
	waitFor(t, 20*time.Second, "projections caught up", func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.Lag == 0 && st.Clock >= clock
	})
}

// TestServeDiskFilledByOther: spl serve on a 40 MiB tmpfs that another
// program fills to its last byte while the server runs. An append then
// fails at once, saying the disk is full, over HTTP and through the CLI;
// reads and the lists work; and once the other program's file is
// removed, appends are taken again within seconds, without a restart,
// with every record acknowledged before still there.
func TestServeDiskFilledByOther(t *testing.T) {
	needFaults(t)
	mnt := mountSmall(t, "40m")
	dir := filepath.Join(mnt, "spl")
	port := freePort(t)
	srv := newNode(t, "serve", "--home", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	srv.start()
	srv.wait(30 * time.Second)
	base := "http://" + srv.http

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHome(t)
	h.env = append(h.env, "SPL_TOKEN_FILE="+tokenFile)
	server := natsURL(port)

	// An answer that never comes fails the test, not the package.
	hc := &http.Client{Transport: authHTTP.Transport, Timeout: 30 * time.Second}
	acked := map[string]bool{} // ids of the records acknowledged
	post := func(n int) (int, string, time.Duration) {
		t.Helper()
		began := time.Now()
		body := fmt.Sprintf(`{"thread":"other","act":"DO","kind":"agent.step","actor":"did:sync:agent:fault","body":{"n":%d}}`, n)
		resp, err := hc.Post(base+"/v1/records", "application/json", strings.NewReader(body))
		if err != nil {
			t.Logf("POST /v1/records: %v", err)
			return 0, err.Error(), time.Since(began)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		took := time.Since(began)
		if resp.StatusCode == http.StatusCreated {
			var rec struct{ ID string }
			if err := json.Unmarshal(b, &rec); err != nil || rec.ID == "" {
				t.Fatalf("POST /v1/records: 201 %s", b)
			}
			acked[rec.ID] = true
		}
		return resp.StatusCode, string(b), took
	}
	for n := range 5 {
		if code, body, _ := post(n); code != http.StatusCreated {
			t.Fatalf("append %d on an empty disk: %d %s", n, code, body)
		}
	}
	h.mustRun(t, nil, "--server", server, "session", "save", "--thread", "other-s",
		"--summary", "saved before the disk filled up", "--learnings", "it fills", "--actor", "did:sync:agent:fault")

	// Another program fills the disk to its last byte.
	filler := fill(t, mnt)

	// And a client with the admin right publishes to the stream directly,
	// which no check of spl's stands before: nats-server itself meets
	// the full disk. Unanswered, or refused.
	admin, err := nats.Connect(server, nats.Token(readSecret(t, filepath.Join(dir, "admin-token"))))
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		began := time.Now()
		_, err := js.Publish(ctx, "spl.rec.other-raw.agent.step", make([]byte, 64<<10))
		t.Logf("a direct publish on the full disk: %v in %v", err, time.Since(began).Round(time.Millisecond))
	}()

	// An append fails fast and says why. What still fits in the store's
	// last pages may land first.
	var code int
	var body string
	var took time.Duration
	n := 5
	for ; n < 100; n++ {
		if code, body, took = post(n); code != http.StatusCreated {
			break
		}
	}
	t.Logf("on a disk filled by another program, after %d more appends: %d in %v: %s", n-5, code, took.Round(time.Millisecond), strings.TrimSpace(body))
	if code == http.StatusCreated {
		t.Fatal("95 appends acknowledged on a full disk")
	}
	if code != http.StatusInsufficientStorage || !strings.Contains(body, "disk full") {
		t.Errorf("append on a full disk: %d %s; want 507 naming the full disk", code, body)
	}
	if took > 2*time.Second {
		t.Errorf("append on a full disk took %v to fail", took)
	}
	// Again, now that the server knows.
	if code, body, took = post(n); code != http.StatusInsufficientStorage || took > time.Second {
		t.Errorf("second append on a full disk: %d in %v: %s; want 507 at once", code, took, body)
	}
	began := time.Now()
	r := h.run(t, nil, "--server", server, "emit", "--thread", "other", "--act", "DO", "--kind", "agent.step",
		"--body", `{"n":-1}`, "--actor", "did:sync:agent:fault")
	t.Logf("spl emit on the full disk: exit %d in %v: %s", r.code, time.Since(began).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	if r.code != 3 || !strings.Contains(r.stderr, "disk full") {
		t.Errorf("spl emit on a full disk: exit %d, stderr %q; want exit 3 naming the full disk", r.code, r.stderr)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("spl emit on a full disk took %v to fail", d)
	}

	// Reads work at 0 bytes free.
	if free, _, ok := diskFree(mnt); ok && free > 0 {
		t.Logf("the disk has %d bytes free", free)
	}
	for _, path := range []string{"/v1/threads/other/records", "/v1/threads", "/v1/threads/other-s/checkpoint"} {
		began := time.Now()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Errorf("GET %s on a full disk: %v", path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s on a full disk: %d", path, resp.StatusCode)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("GET %s on a full disk took %v", path, d)
		}
	}
	for _, args := range [][]string{
		{"thread", "list"},
		{"session", "list"},
		{"session", "show", "other-s"},
		{"thread", "tail", "other"},
	} {
		began := time.Now()
		r := h.run(t, nil, append([]string{"--server", server, "--timeout", "5s"}, args...)...)
		if r.code != 0 {
			t.Errorf("spl %s on a full disk: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("spl %s on a full disk took %v", strings.Join(args, " "), d)
		}
	}

	// The other program's file removed: appends are taken again within
	// seconds, the server not restarted.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	t.Logf("space freed at %s", freed.UTC().Format("15:04:05.000"))
	for {
		n++
		code, body, _ := post(n)
		if code == http.StatusCreated {
			break
		}
		if time.Since(freed) > 10*time.Second {
			t.Fatalf("appends still refused 10s after space was freed, the server not restarted: %d %s\nserver stderr:\n%s", code, body, srv.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := time.Since(freed)
	t.Logf("appends taken again %v after space was freed", again.Round(time.Millisecond))
	if again > 5*time.Second {
		t.Errorf("appends taken again only %v after space was freed", again)
	}

	// Nothing acknowledged is lost, nothing is stored twice.
	var q struct {
		Records []struct {
			ID   string          `json:"id"`
			Body json.RawMessage `json:"body"`
		} `json:"records"`
	}
	if code := getJSON(t, base+"/v1/threads/other/records?limit=1000", &q); code != http.StatusOK {
		t.Fatalf("GET the thread: %d", code)
	}
	seen := map[string]int{}
	bodies := map[string]int{}
	for _, rec := range q.Records {
		seen[rec.ID]++
		bodies[string(rec.Body)]++
		if bodies[string(rec.Body)] > 1 {
			t.Errorf("record %s stored twice", rec.Body)
		}
	}
	for id := range acked {
		if seen[id] == 0 {
			t.Errorf("acknowledged record %s is missing", id)
		}
	}
	t.Logf("%d appends acknowledged, %d records in the thread, none lost", len(acked), len(q.Records))
	for _, line := range strings.Split(srv.stderr.String(), "\n") {
		if strings.Contains(line, "JetStream") || strings.Contains(line, "storage limit") {
			t.Logf("server: %s", line)
		}
	}
	if r := h.run(t, nil, "--server", server, "session", "show", "other-s"); !strings.Contains(r.stdout, "saved before the disk filled up") {
		t.Errorf("session show after space was freed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// diskFree is the space free on the file system that holds dir.
func diskFree(dir string) (free, size int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), true
}
