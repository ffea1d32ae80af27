package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/sdk"
)

// TestMain lets the test binary serve as the harness's worker process.
func TestMain(m *testing.M) {
	if isWorker() {
		os.Exit(workerMain())
	}
	os.Exit(m.Run())
}

// TestHarnessTiny runs the whole harness at the tiny size against spl and
// SQLite and checks that the report has every workload and the targets.
func TestHarnessTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	profiles := t.TempDir()
	t.Setenv(profileEnv, profiles)
	report, path, err := run(ctx, Options{Mode: "tiny", Peers: "spl,sqlite", Out: out, WorkDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, report)
	}
	if !strings.HasPrefix(path, out) {
		t.Fatalf("report path=%q, want under %q", path, out)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != report {
		t.Fatalf("report file differs from the report (err %v)", err)
	}
	for _, want := range []string{
		"## Machine", "## Targets",
		"## 1. Save a checkpoint, one writer", "## 2. 8 concurrent writers", "## 2b. Async saves",
		"## 3. Latest checkpoint", "## 4. Last 50 records", "## 5. 100 most recently active threads",
		"## 6. Projection rebuild", "## 7. Cold open", "## 8. Bytes on disk per record",
		"| spl |", "| sqlite |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "| postgres |") {
		t.Errorf("report has postgres figures; it was not asked for")
	}
	if strings.Contains(report, "**error**") {
		t.Errorf("report has errors:\n%s", report)
	}
	// With SPL_BENCH_PROFILE, each worker profiled its timed read phases.
	for _, name := range []string{"spl-run1-w3.pprof", "spl-run1-w3s.pprof", "spl-run1-w6.pprof", "sqlite-run1-w3.pprof"} {
		if fi, err := os.Stat(filepath.Join(profiles, name)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}
}

// TestStreamConfig checks that the raw JetStream peer's stream has the
// settings spl's log provisions, so that the floor is the same stream.
func TestStreamConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(actor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := natsio.Dial(ctx, natsio.Options{Dir: dir, Name: "bench-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := conn.JS.Stream(ctx, c.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	have, want := s.CachedInfo().Config, streamConfig()
	if !slices.Equal(have.Subjects, want.Subjects) || have.Storage != want.Storage || have.Retention != want.Retention ||
		have.Discard != want.Discard || have.Replicas != want.Replicas || have.MaxMsgSize != want.MaxMsgSize ||
		have.AllowDirect != want.AllowDirect || have.AllowAtomicPublish != want.AllowAtomicPublish || have.Name != want.Name ||
		have.Duplicates != want.Duplicates {
		t.Fatalf("spl's stream config differs from the raw peer's:\nspl: %+v\nraw: %+v", have, want)
	}
}

func TestPlan(t *testing.T) {
	p := NewPlan(20_000, 2_000)
	if got, want := len(p.Thread), 20_000; got != want {
		t.Fatalf("records=%d, want %d", got, want)
	}
	count := make(map[int32]int)
	for i, k := range p.Thread {
		count[k]++
		if got, want := int(p.Step[i]), count[k]; got != want {
			t.Fatalf("record %d: step=%d, want %d", i, got, want)
		}
	}
	if got, want := len(count), 2_000; got != want {
		t.Fatalf("threads=%d, want %d", got, want)
	}
	if got, want := len(p.Long), 20; got != want {
		t.Fatalf("long threads=%d, want %d", got, want)
	}
	for _, k := range p.Long {
		if got, want := count[int32(k)], p.LongLen; got != want {
			t.Fatalf("long thread %d has %d records, want %d", k, got, want)
		}
	}
}

func TestLangGraphRow(t *testing.T) {
	c := content(7, 3)
	th := newLGThreads()
	r1, err := th.next("t", &c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := th.next("t", &c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r1.Parent != nil || r2.Parent == nil || *r2.Parent != r1.ID {
		t.Fatalf("parents: %v, %v; want nil, %s", r1.Parent, r2.Parent, r1.ID)
	}
	if r2.ID <= r1.ID {
		t.Fatalf("checkpoint ids not increasing: %s then %s", r1.ID, r2.ID)
	}
	var vs [][3][]byte
	for _, b := range r2.Blobs {
		vs = append(vs, [3][]byte{[]byte(b.Channel), []byte(b.Type), b.Blob})
	}
	got, err := decodeLG(r2.Checkpoint, vs)
	if err != nil {
		t.Fatal(err)
	}
	if got.Summary != c.Summary || !slices.Equal(got.Learnings, c.Learnings) || !slices.Equal(got.NextSteps, c.NextSteps) {
		t.Fatalf("decoded %+v, want %+v", got, c)
	}
}

func TestMsgpackStrings(t *testing.T) {
	for _, list := range [][]string{{}, {"a"}, {strings.Repeat("x", 31), strings.Repeat("y", 200), strings.Repeat("z", 300)}} {
		got, err := unmsgpackStrings(msgpackStrings(list))
		if err != nil || !slices.Equal(got, list) {
			t.Fatalf("round trip of %d strings: %v, %v", len(list), len(got), err)
		}
	}
}
