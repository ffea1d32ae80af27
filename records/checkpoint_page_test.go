package records

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestPageCheckpointBody checks the checkpoint body of the
// session-checkpoints page: next_steps as one text string, and thread,
// session_id and actor in the body. The string is stored as given and
// read back as the one item of NextSteps; thread and actor must match
// the header.
func TestPageCheckpointBody(t *testing.T) {
	const thread, actor = "th_auth_refactor_abc123", "did:sync:agent:dev"
	page := `{"summary":"Completed auth refactor","learnings":["mutex pattern worked"],"next_steps":"Write migration tests",` +
		`"thread":"th_auth_refactor_abc123","session_id":"sess_1","actor":"did:sync:agent:dev"}`
	body, err := BodyFromJSON([]byte(page))
	if err != nil {
		t.Fatalf("BodyFromJSON: %v", err)
	}
	r, err := New(ActLearn, KindCheckpoint, thread, actor, time.UnixMilli(1), RawBody(body))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cp, err := DecodeCheckpoint(r.Body)
	if err != nil {
		t.Fatalf("DecodeCheckpoint: %v", err)
	}
	if got, want := len(cp.NextSteps), 1; got != want || !cp.NextStepsText || cp.NextSteps[0] != "Write migration tests" {
		t.Fatalf("next steps=%q text=%v, want the one string as given", cp.NextSteps, cp.NextStepsText)
	}
	if got, want := cp.SessionID, "sess_1"; got != want {
		t.Fatalf("session id=%q, want %q", got, want)
	}
	for _, generic := range []bool{false, true} {
		var again []byte
		if generic {
			again, err = cp.marshalMap()
		} else {
			again, err = cp.MarshalCBOR()
		}
		if err != nil {
			t.Fatalf("encode again (generic %v): %v", generic, err)
		}
		if !bytes.Equal(again, r.Body) {
			t.Fatalf("encode again (generic %v) changed the body:\n got %x\nwant %x", generic, again, r.Body)
		}
	}
	g, err := decodeCheckpointGeneric(r.Body)
	if err != nil || !g.NextStepsText || g.NextSteps[0] != "Write migration tests" {
		t.Fatalf("generic decode=%+v, %v", g, err)
	}
	js, err := BodyToJSON(r.Body)
	if err != nil {
		t.Fatalf("BodyToJSON: %v", err)
	}
	if !bytes.Contains(js, []byte(`"next_steps":"Write migration tests"`)) {
		t.Fatalf("JSON body %s does not keep next_steps as given", js)
	}

	// The flat encoder writes the string too.
	flat := Checkpoint{Summary: "s", Learnings: []string{"l"}, NextSteps: []string{"n"}, NextStepsText: true}
	if _, err := New(ActLearn, KindCheckpoint, thread, actor, time.UnixMilli(1), &flat); err != nil {
		t.Fatalf("New flat: %v", err)
	}
	flat.NextSteps = []string{"a", "b"}
	if _, err := New(ActLearn, KindCheckpoint, thread, actor, time.UnixMilli(1), &flat); !isField(err, "body.next_steps") {
		t.Fatalf("two steps as one text: err=%v, want a field error on body.next_steps", err)
	}

	for _, tc := range []struct{ body, field string }{
		{`{"summary":"s","learnings":["l"],"thread":"th_other"}`, "body.thread"},
		{`{"summary":"s","learnings":["l"],"actor":"did:sync:agent:other"}`, "body.actor"},
		{`{"summary":"s","learnings":["l"],"thread":1}`, "body.thread"},
		{`{"summary":"s","learnings":["l"],"session_id":1}`, "body.session_id"},
		{`{"summary":"s","learnings":["l"],"next_steps":1}`, "body.next_steps"},
	} {
		body, err := BodyFromJSON([]byte(tc.body))
		if err != nil {
			t.Fatalf("BodyFromJSON(%s): %v", tc.body, err)
		}
		_, err = New(ActLearn, KindCheckpoint, thread, actor, time.UnixMilli(1), RawBody(body))
		if !isField(err, tc.field) {
			t.Errorf("%s: err=%v, want a field error on %s", tc.body, err, tc.field)
		}
	}
}

func isField(err error, field string) bool {
	var fe *FieldError
	return errors.As(err, &fe) && fe.Field == field
}
