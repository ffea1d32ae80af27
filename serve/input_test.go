package serve

import (
	"strings"
	"testing"

	"github.com/spl-dev/spl/wire"
)

// TestEmitRefusesChangedInput checks that POST /v1/records refuses, with
// 400 naming the field and the rule, every request that encoding/json
// would have taken with something changed, and that the thread the
// requests name keeps exactly the records it had.
func TestEmitRefusesChangedInput(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	const thread = "th_input"
	if code := call(t, "POST", b+"/v1/records", emitBody(thread, "DO", "agent.step", `{"n":1}`), nil); code != 201 {
		t.Fatalf("seed emit: code %d, want 201", code)
	}
	records := func() string {
		var q queryResponse
		if code := call(t, "GET", b+"/v1/threads/"+thread+"/records", "", &q); code != 200 {
			t.Fatalf("query: code %d", code)
		}
		var ids []string
		for _, r := range q.Records {
			ids = append(ids, r.ID+" "+string(r.Body))
		}
		return strings.Join(ids, "\n")
	}
	before := records()
	// req is a request for the thread with the given fields after its
	// own (thread, act, kind, actor).
	req := func(rest string) string {
		return `{"thread":"` + thread + `","act":"DO","kind":"agent.step","actor":"` + actor + `",` + rest + `}`
	}
	for _, tt := range []struct {
		name, body, field, rule string
	}{
		{"duplicate request field", req(`"body":{},"thread":"th_other"`), "thread", `duplicate key "thread"`},
		{"duplicate body field", req(`"body":{"x":1,"x":2}`), "body.x", `duplicate key "x"`},
		{"duplicate nested key", req(`"body":{"a":{"b":{"c":1,"c":1}}}`), "body.a.b.c", `duplicate key "c"`},
		{"field in another case", req(`"body":{},"THREAD":"th_other"`), "THREAD", "unknown field (field names are case-sensitive)"},
		{"invalid UTF-8 in body", req("\"body\":{\"s\":\"a\xffb\"}"), "body.s", "invalid UTF-8"},
		{"invalid UTF-8 in a field", "{\"thread\":\"" + thread + "\xfe\",\"act\":\"DO\",\"kind\":\"k\",\"actor\":\"" + actor + "\",\"body\":{}}", "thread", "invalid UTF-8"},
		{"lone surrogate in body", req(`"body":{"s":"\ud800"}`), "body.s", `lone surrogate \ud800`},
		{"lone surrogate in a field", `{"thread":"` + thread + `\udfff","act":"DO","kind":"k","actor":"` + actor + `","body":{}}`, "thread", `lone surrogate \udfff`},
		{"underflow", req(`"body":{"a":{"b":1e-400}}`), "body.a.b", `number "1e-400" cannot be kept exactly`},
		{"overflow", req(`"body":{"f":[1e400]}`), "body.f[0]", `number "1e400" cannot be kept exactly`},
		{"integer past uint64", req(`"body":{"n":18446744073709551616}`), "body.n", "out of range"},
		{"more digits than a float64", req(`"body":{"pi":3.141592653589793238462643383279}`), "body.pi", "would keep 3.141592653589793"},
		{"rounded to a denormal", req(`"body":{"x":[2.5e-324]}`), "body.x[0]", "would keep 5e-324"},
		{"a float's exact value for its text", req(`"body":{"x":0.1000000000000000055511151231257827}`), "body.x", "would keep 0.1"},
		{"integer minus zero", req(`"body":{"z":-0}`), "body.z", "no negative zero"},
		{"ts not an integer", req(`"body":{},"ts":1e-400`), "ts", "must be an integer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e wire.Error
			if got, want := call(t, "POST", b+"/v1/records", tt.body, &e), 400; got != want {
				t.Fatalf("code=%d, want %d (%+v)", got, want, e)
			}
			if got, want := e.Field, tt.field; got != want {
				t.Fatalf("field=%q, want %q (%+v)", got, want, e)
			}
			if !strings.Contains(e.Rule, tt.rule) {
				t.Fatalf("rule=%q, want it to contain %q", e.Rule, tt.rule)
			}
			if !strings.Contains(e.Error, tt.field) {
				t.Fatalf("error=%q, want it to name %q", e.Error, tt.field)
			}
		})
	}
	if after := records(); after != before {
		t.Fatalf("thread %s changed:\nbefore %s\nafter  %s", thread, before, after)
	}
	var h healthJSON
	call(t, "GET", b+"/healthz", "", &h)
	if got, want := h.LastClock, uint64(1); got != want {
		t.Fatalf("last_clock=%d, want %d: a refused request reached the log", got, want)
	}
}

// TestMillisecondsRefusedPastRange: a number of milliseconds past what a
// duration holds is refused naming its field, not wrapped into another
// duration (18446744073711 ms once became a 1 ms retention age), and
// nothing is stored.
func TestMillisecondsRefusedPastRange(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	const huge = "18446744073711"
	for _, tt := range []struct{ method, path, body, field string }{
		{"PUT", "/v1/retention", `{"thread":"th_ms","keep_last":2,"max_age_ms":` + huge + `,"actor":"` + actor + `"}`, "max_age_ms"},
		{"POST", "/v1/threads/th_ms/prune", `{"older_than_ms":` + huge + `,"actor":"` + actor + `"}`, "older_than_ms"},
		{"POST", "/v1/threads/th_ms/pause", `{"elapsedMs":` + huge + `,"actor":"` + actor + `"}`, "elapsedMs"},
	} {
		var e wire.Error
		if code := call(t, tt.method, b+tt.path, tt.body, &e); code != 400 || e.Field != tt.field {
			t.Errorf("%s %s with %s ms: %d %+v, want 400 naming %s", tt.method, tt.path, huge, code, e, tt.field)
		}
	}
	var pol struct {
		Policies []any `json:"policies"`
	}
	if code := call(t, "GET", b+"/v1/retention", "", &pol); code != 200 || len(pol.Policies) != 0 {
		t.Errorf("GET /v1/retention: %d %+v, want no policy stored", code, pol)
	}
	// Each is refused input on every route alike.
	if m := scrape(t, s); !strings.Contains(m, `spl_http_refused_total{reason="invalid"} 3`) {
		t.Errorf("refused invalid not counted once a route:\n%s", grepLines(m, "spl_http_refused_total"))
	}
}

// TestNoActorSaysWhatAClientSends: a write with no actor, on a server
// with none, is refused naming the field the request lacks, not the
// flags and options of the other faces.
func TestNoActorSaysWhatAClientSends(t *testing.T) {
	s := start(t, Config{})
	var e wire.Error
	if code := call(t, "POST", base(s)+"/v1/records", `{"thread":"th_na","act":"DO","kind":"agent.step","body":{}}`, &e); code != 400 || e.Field != "actor" ||
		!strings.Contains(e.Error, "actor field") || strings.Contains(e.Error, "--actor") || strings.Contains(e.Error, "WithActor") {
		t.Fatalf("no actor: %d %+v", code, e)
	}
}
