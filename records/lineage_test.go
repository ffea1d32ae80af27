package records

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func testID(thread string) ID {
	return Header{V: FormatVersion, Act: ActLearn, Kind: KindCheckpoint, Thread: thread, Actor: "did:x:y", TS: 1}.ID()
}

// Lineage fields survive a round trip, and the bytes do too.
func TestCheckpointLineageRoundTrip(t *testing.T) {
	c := Checkpoint{
		Summary: "s", Learnings: []string{"l"}, Parent: testID("a"),
		State:      map[string]any{"phase": "2.5", "todos": []any{map[any]any{"content": "x", "status": "pending"}}},
		ForkedFrom: &ForkLink{Thread: "src", ID: testID("src"), Clock: 7},
		Extra:      map[string]any{"step": uint64(3)},
	}
	b, err := c.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if back.Parent != c.Parent || !reflect.DeepEqual(back.ForkedFrom, c.ForkedFrom) || back.State["phase"] != "2.5" {
		t.Fatalf("decoded %+v, want %+v", back, c)
	}
	again, err := back.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoded bytes differ")
	}
}

// A body stored before the lineage keys had a meaning reads as it was
// (the value in Extra, the bytes unchanged), and is refused for writing
// with the field named.
func TestCheckpointLineageLegacyValues(t *testing.T) {
	for _, tc := range []struct {
		json, field string
	}{
		{`{"summary":"s","learnings":["l"],"parent":"not-an-id"}`, "body.parent"},
		{`{"summary":"s","learnings":["l"],"parent":7}`, "body.parent"},
		{`{"summary":"s","learnings":["l"],"state":"done"}`, "body.state"},
		{`{"summary":"s","learnings":["l"],"forked_from":{"thread":"t","id":"x","clock":1}}`, "body.forked_from.id"},
		{`{"summary":"s","learnings":["l"],"forked_from":{"thread":"t"}}`, "body.forked_from"},
		{`{"summary":"s","learnings":["l"],"forked_from":{"thread":"","id":"` + testID("t").String() + `","clock":1}}`, "body.forked_from.thread"},
		{`{"summary":"s","learnings":["l"],"forked_from":{"thread":"t","id":"` + testID("t").String() + `","clock":0}}`, "body.forked_from.clock"},
	} {
		b, err := BodyFromJSON([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		c, err := DecodeCheckpoint(b)
		if err != nil {
			t.Fatalf("%s: read: %v", tc.json, err)
		}
		again, err := c.MarshalCBOR()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoded %x, %v; want the stored bytes", tc.json, again, err)
		}
		_, err = New(ActLearn, KindCheckpoint, "t", "did:x:y", time.Now(), RawBody(b))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: New: %v, want a FieldError on %s", tc.json, err, tc.field)
		}
	}
}

// A checkpoint with a parent and nothing else new stays on the fast
// paths: direct encoding and direct decoding.
func TestCheckpointParentDirect(t *testing.T) {
	c := Checkpoint{Summary: "s", Learnings: []string{"l"}, Parent: testID("a"), Name: "n"}
	b, err := c.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := decodeCheckpointDirect(b)
	if !ok || d.Parent != c.Parent {
		t.Fatalf("direct decode: %v %+v", ok, d)
	}
}
