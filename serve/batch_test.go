package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// batchOf is the request of POST /v1/records/batch holding items.
func batchOf(items ...string) string {
	return `{"records":[` + strings.Join(items, ",") + `]}`
}

// TestBatch checks that each item of a batch gets the answer POST
// /v1/records would give it: the good ones land, in the request's order
// on their thread, and each bad one fails alone, naming its field and
// rule.
func TestBatch(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	items := []string{
		emitBody("th_batch", "DO", "agent.step", `{"step":1}`),
		emitBody("th_batch", "DO", "agent.step", `{"step":2}`),
		emitBody("th_batch", "bad", "agent.step", `{"step":3}`),
		emitBody("th_batch", "DO", "agent.step", `{"a":1,"a":2}`),
		`{"thread":"th_batch","act":"DO","kind":"agent.step","actor":"` + actor + `","body":{},"Body":{}}`,
		emitBody("th_batch_other", "LEARN", records.KindCheckpoint, `{"summary":"s","learnings":["l"],"next_steps":"n"}`),
		emitBody("th_batch", "DO", "agent.step", `{"step":4}`),
		`"not an object"`,
		emitBody("th_batch", "DO", "agent.step", `{"pi":3.141592653589793238462643383279}`),
	}
	var resp batchResponse
	if code := call(t, "POST", b+"/v1/records/batch", batchOf(items...), &resp); code != http.StatusOK {
		t.Fatalf("code=%d, want 200: %+v", code, resp)
	}
	if got, want := len(resp.Results), len(items); got != want {
		t.Fatalf("%d results, want %d", got, want)
	}
	want := []struct {
		status      int
		field, rule string
	}{
		{201, "", ""},
		{201, "", ""},
		{400, "act", "must match ^[A-Z][A-Z0-9_]{1,15}$"},
		{400, "body.a", `duplicate key "a"`},
		{400, "Body", "unknown field (field names are case-sensitive)"},
		{201, "", ""},
		{201, "", ""},
		{400, "", ""},
		{400, "body.pi", "would keep 3.141592653589793"},
	}
	for i, w := range want {
		r := resp.Results[i]
		if r.Status != w.status || r.Field != w.field || w.rule != "" && !strings.Contains(r.Rule, w.rule) {
			t.Errorf("item %d: %+v, want status %d field %q rule %q", i, r, w.status, w.field, w.rule)
		}
		if got := r.Record != nil; got != (w.status == 201) {
			t.Errorf("item %d: record=%v, want one only with 201", i, r.Record)
		}
		if w.status != 201 && r.Error == "" {
			t.Errorf("item %d: no error message: %+v", i, r)
		}
	}
	// Each bad item fails as it fails alone.
	for _, i := range []int{2, 3, 4} {
		var e wire.Error
		code := call(t, "POST", b+"/v1/records", items[i], &e)
		if r := resp.Results[i]; code != r.Status || e.Field != r.Field || e.Rule != r.Rule || e.Error != r.Error {
			t.Errorf("item %d alone: %d %+v, in the batch %+v", i, code, e, r)
		}
	}
	// The thread holds the good items in the request's order, chained.
	var q queryResponse
	if code := call(t, "GET", b+"/v1/threads/th_batch/records", "", &q); code != http.StatusOK {
		t.Fatalf("query: code=%d", code)
	}
	var steps []string
	prev := ""
	for i, r := range q.Records {
		var body struct{ Step int }
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("record %d: body %s: %v", i, r.Body, err)
		}
		steps = append(steps, fmt.Sprint(body.Step))
		if p := deref(r.Prev); p != prev {
			t.Errorf("record %d: prev=%q, want %q", i, p, prev)
		}
		prev = r.ID
	}
	if got, want := strings.Join(steps, " "), "1 2 4"; got != want {
		t.Fatalf("steps=%s, want %s", got, want)
	}
	if got, want := q.Records[2].ID, resp.Results[6].Record.ID; got != want {
		t.Errorf("stored id=%s, the batch answered %s", got, want)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestBatchServiceLayer checks that a batch goes through the service
// layer's write path: the thread's redaction policy takes covered values
// out, and a checkpoint enforces its thread's retention.
func TestBatchServiceLayer(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	ctx := context.Background()
	const thread = "th_batch_rules"
	if _, err := s.c.Load().SetRedaction(ctx, actor, sdk.RedactionPolicy{Thread: thread, Keys: []string{"password"}}); err != nil {
		t.Fatalf("SetRedaction: %v", err)
	}
	if code := call(t, "PUT", b+"/v1/retention", `{"thread":"`+thread+`","keep_last":1,"actor":"`+actor+`"}`, nil); code != http.StatusCreated {
		t.Fatalf("PUT retention: code=%d", code)
	}
	cp := func(n int) string {
		return emitBody(thread, "LEARN", records.KindCheckpoint, fmt.Sprintf(`{"summary":"s%d","learnings":["l"],"next_steps":"n","password":"hunter2"}`, n))
	}
	var resp batchResponse
	if code := call(t, "POST", b+"/v1/records/batch", batchOf(cp(1), cp(2), cp(3)), &resp); code != http.StatusOK {
		t.Fatalf("code=%d", code)
	}
	for i, r := range resp.Results {
		if r.Status != http.StatusCreated {
			t.Fatalf("item %d: %+v", i, r)
		}
		if strings.Contains(string(r.Record.Body), "hunter2") {
			t.Errorf("item %d: stored the covered value: %v", i, r.Record.Body)
		}
	}
	var cps checkpointsResponse
	if code := call(t, "GET", b+"/v1/threads/"+thread+"/checkpoints", "", &cps); code != http.StatusOK {
		t.Fatalf("checkpoints: code=%d", code)
	}
	if got, want := len(cps.Checkpoints), 1; got != want {
		t.Fatalf("%d checkpoints kept, want %d (keep_last 1)", got, want)
	}
	if got, want := cps.Checkpoints[0].ID, resp.Results[2].Record.ID; got != want {
		t.Errorf("kept %s, want the newest %s", got, want)
	}
}

// TestBatchLimits checks that a batch is bounded, by items and by bytes,
// and that the answer names the limit; and that its request is read as
// strictly as any.
func TestBatchLimits(t *testing.T) {
	s := start(t, Config{MaxBody: 4096})
	b := base(s)
	one := emitBody("th_limits", "DO", "agent.step", `{"step":1}`)
	many := make([]string, maxBatchRecords+1)
	for i := range many {
		many[i] = `{}`
	}
	big := emitBody("th_limits", "DO", "agent.step", `{"text":"`+strings.Repeat("x", 5000)+`"}`)
	for _, c := range []struct {
		name, body  string
		code        int
		field, rule string
	}{
		{"empty", batchOf(), 400, "records", "required: an array of 1 to 1000 records"},
		{"no records", `{}`, 400, "records", "required: an array of 1 to 1000 records"},
		{"not an array", `{"records":{}}`, 400, "records", "required: an array of 1 to 1000 records"},
		{"too many", batchOf(many...), 400, "records", "at most 1000 records a batch"},
		{"too large", batchOf(big), 413, "records", "at most 4096 bytes a request"},
		{"unknown field", `{"records":[` + one + `],"extra":1}`, 400, "extra", "unknown field (field names are case-sensitive)"},
		{"field in another case", `{"Records":[` + one + `]}`, 400, "Records", "unknown field (field names are case-sensitive)"},
		{"duplicate key", `{"records":[` + one + `],"records":[` + one + `]}`, 400, "records", "duplicate key"},
		{"data after", batchOf(one) + `{}`, 400, "", "request must be one JSON object"},
		{"not JSON", `{"records":[`, 400, "", "request must be one JSON object"},
	} {
		var e wire.Error
		if code := call(t, "POST", b+"/v1/records/batch", c.body, &e); code != c.code || e.Field != c.field || e.Rule != c.rule {
			t.Errorf("%s: %d %+v, want %d field %q rule %q", c.name, code, e, c.code, c.field, c.rule)
		}
	}
	// Nothing of a refused batch was written.
	var q queryResponse
	call(t, "GET", b+"/v1/threads/th_limits/records", "", &q)
	if got := len(q.Records); got != 0 {
		t.Fatalf("%d records written by refused batches", got)
	}
}

// TestBatchReadToken checks that a batch needs the write right.
func TestBatchReadToken(t *testing.T) {
	s := start(t, Config{})
	req, _ := http.NewRequest("POST", base(s)+"/v1/records/batch", strings.NewReader(batchOf(emitBody("th", "DO", "agent.step", `{}`))))
	req.Header.Set("Authorization", "Bearer "+s.cfg.HTTPReadToken)
	var e wire.Error
	if code, _ := callReq(t, http.DefaultClient, req, &e); code != http.StatusForbidden {
		t.Fatalf("code=%d %+v, want 403", code, e)
	}
}

// An append with expected_clock lands only while its thread is at that
// clock (0: no record yet); else 409 naming the clock it is at, and
// nothing is stored. A batch does not take it.
func TestExpectedClock(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	emit := func(expected string) (int, wire.Record, wire.Error) {
		body := `{"thread":"th_cas","act":"DO","kind":"agent.step","actor":"` + actor + `","body":{"n":1}` + expected + `}`
		var raw json.RawMessage
		code := call(t, "POST", b+"/v1/records", body, &raw)
		var rec wire.Record
		var e wire.Error
		_ = json.Unmarshal(raw, &rec)
		_ = json.Unmarshal(raw, &e)
		return code, rec, e
	}
	code, first, _ := emit(`,"expected_clock":0`)
	if code != http.StatusCreated {
		t.Fatalf("expected_clock 0 on a new thread: %d", code)
	}
	code, _, e := emit(`,"expected_clock":0`)
	if code != http.StatusConflict || e.Field != "expected_clock" || e.Clock == nil || *e.Clock != first.Clock {
		t.Fatalf("expected_clock 0 on a thread at %d: %d %+v, want 409 with clock %d", first.Clock, code, e, first.Clock)
	}
	code, second, _ := emit(fmt.Sprintf(`,"expected_clock":%d`, first.Clock))
	if code != http.StatusCreated || second.Prev == nil || *second.Prev != first.ID {
		t.Fatalf("expected_clock at the thread's clock: %d %+v", code, second)
	}
	var q queryResponse
	if call(t, "GET", b+"/v1/threads/th_cas/records", "", &q); len(q.Records) != 2 {
		t.Fatalf("%d records stored, want 2: a refused conditional append stored something", len(q.Records))
	}
	var resp batchResponse
	item := `{"thread":"th_cas","act":"DO","kind":"agent.step","actor":"` + actor + `","body":{},"expected_clock":9}`
	if code := call(t, "POST", b+"/v1/records/batch", batchOf(item), &resp); code != http.StatusOK || resp.Results[0].Status != 400 || resp.Results[0].Field != "expected_clock" {
		t.Fatalf("batch item with expected_clock: %d %+v", code, resp)
	}
}
