package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// TestParseAgeRange checks that an age longer than a time.Duration holds
// is refused with the bound, not wrapped around to a short or negative
// duration.
func TestParseAgeRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"106751d", 106751 * 24 * time.Hour},
		{"15250w", 15250 * 7 * 24 * time.Hour},
		{"2562047h", 2562047 * time.Hour},
	} {
		if got, err := parseAge(tc.in); err != nil || got != tc.want {
			t.Errorf("parseAge(%q)=%v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, rule string }{
		{"616385997d", "at most 106751d"},  // wrapped to 524ms before
		{"200000d", "at most 106751d"},     // wrapped to a negative duration before
		{"4294967296d", "at most 106751d"}, // past 32 bits
		{"99999999999999999999d", "at most 106751d"},
		{"15251w", "at most 15250w"},
		{"2562048h", "at most 2562047h"},
		{"0s", "positive"},
		{"-1h", "positive"},
	} {
		got, err := parseAge(tc.in)
		if err == nil {
			t.Errorf("parseAge(%q)=%v, want an error", tc.in, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("parseAge(%q): %v; want it to say %q", tc.in, err, tc.rule)
		}
	}
}

// TestAgeFlagsRefuseOverflow runs the commands: an age that does not fit
// exits 1 naming the flag, and nothing is stored.
func TestAgeFlagsRefuseOverflow(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"retention", "set", "--thread", "ovf", "--keep-last", "1", "--max-age", "616385997d", "--actor", seedActor}, "--max-age"},
		{[]string{"retention", "set", "--all", "--keep-last", "1", "--max-age", "200000d", "--actor", seedActor}, "--max-age"},
		{[]string{"thread", "list", "--since", "200000d"}, "--since"},
	} {
		r := spl(t, home, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.flag+": must be at most 106751d") {
			t.Errorf("spl %v: exit %d, stderr %q; want %d naming %s and the bound", tc.args, r.code, r.stderr, ExitUsage, tc.flag)
		}
	}
	if r := mustSPL(t, home, "", "retention", "show", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("retention show=%s, want [] (no policy stored)", r.stdout)
	}
}

// TestFilterFieldRules checks that --kind of thread list follows the
// rule of a record's kind: a NATS wildcard or an upper-case kind is
// refused (exit 1, naming the field), a valid one is taken as is.
func TestFilterFieldRules(t *testing.T) {
	home := t.TempDir()
	mustSPL(t, home, "", "emit", "--thread", "th_f", "--act", "DO", "--kind", "agent.step", "--body", `{}`, "--actor", seedActor)
	for _, kind := range []string{">", "agent.*", "*", "Agent.Step", "agent..step"} {
		r := spl(t, home, "", "thread", "list", "--kind", kind)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--kind: spl/records: kind: must") {
			t.Errorf("thread list --kind %q: exit %d, stderr %q; want %d and the kind rule", kind, r.code, r.stderr, ExitUsage)
		}
	}
	r := mustSPL(t, home, "", "thread", "list", "--kind", "agent.step", "--json")
	if !strings.Contains(r.stdout, `"th_f"`) {
		t.Fatalf("thread list --kind agent.step=%s, want th_f", r.stdout)
	}
	// A well-known kind is a valid filter although its act is not KNOW.
	if r := spl(t, home, "", "thread", "list", "--kind", records.KindCheckpoint); r.code != ExitOK {
		t.Fatalf("thread list --kind %s: exit %d, stderr %q", records.KindCheckpoint, r.code, r.stderr)
	}
}

// TestVerifyArguments checks the two usage errors of verify, and that a
// thread with no records exits 2 (not found) instead of passing.
func TestVerifyArguments(t *testing.T) {
	home := t.TempDir()
	mustSPL(t, home, "", seedSave...)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"verify"}, ExitUsage, "verify: give a thread to verify, or --all for the whole log"},
		{[]string{"verify", seedThread, "--all"}, ExitUsage, "verify: give a thread or --all, not both"},
		{[]string{"verify", "nosuchthread"}, ExitNotFound, `verify: thread "nosuchthread" has no records`},
		{[]string{"verify", strings.Repeat("t", 257)}, ExitUsage, "thread: must be 1-256 bytes"},
	} {
		r := spl(t, home, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("spl %.40q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.stderr)
		}
		if r.code != ExitOK && r.stdout != "" {
			t.Errorf("spl %.40q: a refused command printed %q on stdout", tc.args, r.stdout)
		}
	}
	mustSPL(t, home, "", "verify", seedThread)
}

// TestServeConfigNamesFlags checks that spl serve's configuration errors
// name the flags, not the fields of serve.Config, and that --log-level
// lists its values.
func TestServeConfigNamesFlags(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--user", "u", "--password", ""}, "serve: --password: --user and --password go together"},
		{[]string{"serve", "--listen", "10.1.2.3:4222"}, `serve: --listen: "10.1.2.3" is not a loopback address; listening on it needs --allow-remote`},
		{[]string{"serve", "--token", "t", "--user", "u", "--password", "p"}, "serve: --token: cannot be combined with --user or --nkey"},
		{[]string{"serve", "--cluster-name", "c", "--name", "n", "--cluster", "127.0.0.1:0", "--routes", "nats://127.0.0.1:1,x"}, "serve: --routes (value 2): must be a URL"},
		{[]string{"session", "list", "--status", "failed", "--actor", "did:sync:agent:x"}, "session list: --actor keeps the latest checkpoints"},
		{[]string{"serve", "--replicas", "3"}, "serve: --replicas: more than 1 needs a cluster (--cluster-name)"},
		{[]string{"serve", "--log-level", "loud"}, `serve: --log-level: must be debug, info, warn or error, got "loud"`},
		{[]string{"serve", "--log-format", "xml"}, `serve: --log-format: must be text or json, got "xml"`},
	} {
		r := spl(t, home, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("spl %q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, ExitUsage, tc.want)
		}
		for _, field := range []string{"Password", "AllowRemote", "ClusterName", "Routes[", "NKeys", "slog:"} {
			if strings.Contains(r.stderr, field) {
				t.Errorf("spl %q: stderr %q names %s", tc.args, r.stderr, field)
			}
		}
	}
}

// TestJSONTimeLayout checks that every JSON time has three fractional
// digits, trailing zeros kept, as docs/cli.md says.
func TestJSONTimeLayout(t *testing.T) {
	whole := time.Date(2026, 11, 21, 23, 46, 52, 0, time.FixedZone("CET", 3600))
	tenths := whole.Add(320 * time.Millisecond)
	const wantWhole, wantTenths = "2026-11-21T22:46:52.000Z", "2026-11-21T22:46:52.320Z"

	rec, err := records.New(records.ActDo, "agent.step", "t", seedActor, whole, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	rj, err := wire.NewRecord(rec.ID(), 1, rec)
	if err != nil {
		t.Fatal(err)
	}
	tomb := sdk.Tombstone{ID: rec.ID(), Header: rec.Header, Time: tenths}
	tj := newTombstoneJSON(tomb)
	status := newStatusJSON(sdk.ProjectionStatus{Updated: whole})
	for _, tc := range []struct{ name, got, want string }{
		{"record time", rj.Time, wantWhole},
		{"erased record time", tj.Time, wantWhole},
		{"erased.time", tj.Erased.Time, wantTenths},
		{"policy time", newPolicyJSON(sdk.RetentionPolicy{Thread: "t", KeepLast: 1, Time: whole}).Time, wantWhole},
		{"thread last_time", sdk.ThreadInfo{LastActive: tenths}.Wire().LastTime, wantTenths},
		{"checkpoint time", newLatestJSON(sdk.CheckpointInfo{Time: whole}).Time, wantWhole},
		{"projection updated", status.Updated, wantWhole},
	} {
		if tc.got != tc.want {
			t.Errorf("%s=%q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if _, err := json.Marshal(rj); err != nil {
		t.Fatal(err)
	}
}
