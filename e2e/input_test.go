package e2e

import (
	"strings"
	"testing"
)

// TestRefusedInput checks, with the built binary, input that used to be
// taken silently: an age past what a duration holds, a kind filter that
// is a NATS wildcard, a thread with no records to verify, and spl serve
// flags whose errors named Go fields. Each exits with its documented code
// and a message naming the flag or field and the rule.
func TestRefusedInput(t *testing.T) {
	h := newHome(t)
	h.mustRun(t, nil, "session", "save", "--thread", "th_in", "--summary", "s", "--learnings", "l", "--actor", seedActor)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"max-age wraps", []string{"retention", "set", "--thread", "ovf2", "--keep-last", "1", "--max-age", "616385997d", "--actor", seedActor},
			1, "retention set: --max-age: must be at most 106751d"},
		{"since wraps", []string{"thread", "list", "--since", "200000d"}, 1, "thread list: --since: must be at most 106751d"},
		{"kind wildcard", []string{"thread", "list", "--kind", ">"}, 1, "thread list: --kind: spl/records: kind: must match"},
		{"verify nothing", []string{"verify"}, 1, "verify: give a thread to verify, or --all"},
		{"verify unknown thread", []string{"verify", "nosuchthread"}, 2, `verify: thread "nosuchthread" has no records`},
		{"serve user alone", []string{"serve", "--user", "u"}, 1, "serve: --password: --user and --password go together"},
		{"serve log level", []string{"serve", "--log-level", "loud"}, 1, "--log-level: must be debug, info, warn or error"},
		{"serve write timeout", []string{"serve", "--http-write-timeout", "5s"}, 1, "serve: --http-write-timeout: must be longer than Heartbeat (15s)"},
		{"serve max conns", []string{"serve", "--http-max-conns", "-1"}, 1, "serve: --http-max-conns: must not be negative, got -1"},
		{"serve request timeout", []string{"serve", "--request-timeout", "-1s"}, 1, "serve: --request-timeout: must not be negative, got -1s"},
		{"pause elapsed", []string{"session", "pause", "th_in", "--elapsed", "-5m", "--actor", seedActor}, 1,
			"session pause: spl/records: constraintState.timeElapsedMs: the time elapsed must not be negative, got -5m0s"},
		{"pause budget", []string{"session", "pause", "th_in", "--budget-spent", "-1", "--actor", seedActor}, 1,
			"session pause: spl/records: constraintState.budgetSpent: the budget spent must not be negative, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q: a refused command printed a result", r.stdout)
			}
		})
	}
	if r := h.mustRun(t, nil, "retention", "show", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("retention show=%s, want [] (the refused policy was not stored)", r.stdout)
	}
	h.mustRun(t, nil, "verify", "th_in")
}
