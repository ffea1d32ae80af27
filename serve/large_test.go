package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// A 10 MB body goes in and comes back whole over HTTP, the envelope a
// reader verifies included; one over the server's --max-record is 413
// naming the field body and the limit, and nothing of it is stored.
func TestLargeRecordOverHTTP(t *testing.T) {
	s := start(t, Config{MaxRecord: 16 << 20})
	b := base(s)
	big := strings.Repeat("m", 10<<20)
	var r wire.Record
	if code := call(t, "POST", b+"/v1/records", emitBody("th_large", "KNOW", "agent.state", fmt.Sprintf(`{"messages":%q}`, big)), &r); code != http.StatusCreated {
		t.Fatalf("POST 10 MB record: code %d, want 201", code)
	}
	var got wire.Record
	if code := call(t, "GET", b+"/v1/records/"+r.ID+"?envelope=true", "", &got); code != http.StatusOK {
		t.Fatalf("GET the record: code %d", code)
	}
	var body struct {
		Messages string `json:"messages"`
	}
	if err := json.Unmarshal(got.Body, &body); err != nil || body.Messages != big {
		t.Fatalf("body read back: %d bytes of messages (%v), want %d", len(body.Messages), err, len(big))
	}
	rec, err := records.Unmarshal(got.Envelope)
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	id, _ := records.ParseID(r.ID)
	if err := rec.Verify(id); err != nil {
		t.Fatalf("envelope does not verify: %v", err)
	}

	over := strings.Repeat("o", 17<<20)
	var e wire.Error
	if code := call(t, "POST", b+"/v1/records", emitBody("th_large", "KNOW", "agent.state", fmt.Sprintf(`{"messages":%q}`, over)), &e); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST 17 MB record: code %d (%+v), want 413", code, e)
	}
	if e.Field != "body" || !strings.Contains(e.Rule, fmt.Sprint(16<<20)) {
		t.Fatalf("413 answer %+v, want field body and the limit", e)
	}
	var q queryResponse
	call(t, "GET", b+"/v1/threads/th_large/records", "", &q)
	if len(q.Records) != 1 {
		t.Fatalf("thread holds %d records after the refusal, want 1", len(q.Records))
	}
}
