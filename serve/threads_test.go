package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/wire"
)

// threadNames lists the threads of a GET /v1/threads answer, in order.
func threadNames(ts []wire.Thread) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Thread
	}
	return strings.Join(names, " ")
}

// TestThreads lists threads from the thread index that the server's own
// projector keeps, as spl serve runs it.
func TestThreads(t *testing.T) {
	var cfg Config
	cfg.Projectors = IndexProjector(context.Background(), cfg, slog.New(slog.DiscardHandler))
	s := start(t, cfg)
	b := base(s)
	const (
		alice = "did:sync:agent:alice"
		bob   = "did:sync:agent:bob"
	)
	old := time.Now().Add(-10 * 24 * time.Hour).UnixMilli()
	emit := func(thread, kind, who string, ts int64) wire.Record {
		t.Helper()
		body := fmt.Sprintf(`{"thread":%q,"act":"DO","kind":%q,"actor":%q,"body":{}}`, thread, kind, who)
		if ts != 0 {
			body = fmt.Sprintf(`{"thread":%q,"act":"DO","kind":%q,"actor":%q,"ts":%d,"body":{}}`, thread, kind, who, ts)
		}
		var r wire.Record
		if code := call(t, "POST", b+"/v1/records", body, &r); code != http.StatusCreated {
			t.Fatalf("emit on %s: code=%d, want 201", thread, code)
		}
		return r
	}
	emit("a", "agent.step", alice, old)
	emit("b", "agent.note", bob, 0)
	emit("c", "agent.note", alice, 0)
	list := func(t *testing.T, query string) threadsResponse {
		t.Helper()
		var l threadsResponse
		if code := call(t, "GET", b+"/v1/threads"+query, "", &l); code != http.StatusOK {
			t.Fatalf("GET /v1/threads%s: code=%d, want 200", query, code)
		}
		return l
	}

	fiveDays := url.QueryEscape(time.Now().Add(-5 * 24 * time.Hour).UTC().Format(time.RFC3339))
	tests := []struct {
		name, query, want string
	}{
		{"all", "", "c b a"},
		{"actor", "?actor=" + alice, "c a"},
		{"kind", "?kind=agent.step", "a"},
		{"since", "?since=" + fiveDays, "c b"},
		{"actor and kind", "?actor=" + alice + "&kind=agent.note", "c"},
		{"no match", "?actor=did:sync:agent:nobody", ""},
		{"limit", "?limit=2", "c b"},
		{"counts only", "?limit=0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := list(t, tt.query)
			if got := threadNames(l.Threads); got != tt.want {
				t.Fatalf("threads=%q, want %q", got, tt.want)
			}
			if got, want := l.Total, uint64(3); got != want {
				t.Fatalf("total=%d, want %d: every thread of the index", got, want)
			}
		})
	}

	t.Run("fresh", func(t *testing.T) {
		// Appended right before the call: listed, first.
		for i := range 3 {
			r := emit(fmt.Sprintf("new%d", i), "agent.step", bob, 0)
			l := list(t, "?limit=1")
			if got, want := threadNames(l.Threads), r.Thread; got != want {
				t.Fatalf("threads=%q, want %q", got, want)
			}
			if l.LogClock != r.Clock || l.AsOf < r.Clock {
				t.Fatalf("log_clock=%d as_of=%d, want %d and at least that", l.LogClock, l.AsOf, r.Clock)
			}
		}
	})
}

// TestThreadsWaitTimesOut: when the index does not catch up within the
// wait, the answer is what it has stored, and says how far that goes.
func TestThreadsWaitTimesOut(t *testing.T) {
	s := start(t, Config{ThreadsWait: time.Nanosecond})
	b := base(s)
	for i := range 3 {
		call(t, "POST", b+"/v1/records", emitBody(fmt.Sprintf("t%d", i), "DO", "agent.step", `{}`), nil)
	}
	var l threadsResponse
	if code := call(t, "GET", b+"/v1/threads", "", &l); code != http.StatusOK {
		t.Fatalf("code=%d, want 200", code)
	}
	if got, want := l.LogClock, uint64(3); got != want {
		t.Fatalf("log_clock=%d, want %d", got, want)
	}
	// Nothing runs the projection here, and the wait is too short to
	// catch it up: the index is as it was, empty.
	if got, want := [3]uint64{l.AsOf, uint64(len(l.Threads)), l.Total}, [3]uint64{0, 0, 0}; got != want {
		t.Fatalf("as_of, threads, total=%v, want %v", got, want)
	}
}
