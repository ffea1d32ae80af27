package cli

import (
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
)

// TestRecordShowRaw checks that record show --raw prints the stored bytes
// of the page's checkpoint (emitted as the page writes it: next_steps one
// string, thread and actor in the body), and that they verify as its id.
func TestRecordShowRaw(t *testing.T) {
	home := t.TempDir()
	body := `{"summary":"Completed auth refactor","learnings":["mutex pattern worked"],"next_steps":"Write migration tests","thread":"th_page","actor":"did:sync:agent:dev"}`
	rc := decodeJSON[receiptJSON](t, mustSPL(t, home, "", "emit", "--thread", "th_page", "--act", "LEARN", "--kind", records.KindCheckpoint,
		"--actor", seedActor, "--body", body, "--json").stdout)
	out := mustSPL(t, home, "", "record", "show", rc.ID, "--thread", "th_page", "--raw").stdout
	rec, err := records.Unmarshal([]byte(out))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	id, err := records.ParseID(rc.ID)
	if err != nil {
		t.Fatalf("ParseID: %v", err)
	}
	if err := rec.Verify(id); err != nil {
		t.Fatalf("the raw bytes do not verify as %s: %v", id, err)
	}
	js, err := records.BodyToJSON(rec.Body)
	if err != nil {
		t.Fatalf("BodyToJSON: %v", err)
	}
	// Canonical CBOR orders the keys; the values are as given.
	if got, want := string(js), `{"actor":"did:sync:agent:dev","learnings":["mutex pattern worked"],"next_steps":"Write migration tests","summary":"Completed auth refactor","thread":"th_page"}`; got != want {
		t.Fatalf("body=%s, want %s", got, want)
	}
	// A thread in the body that is not the record's is refused, naming it.
	r := spl(t, home, "", "emit", "--thread", "th_page", "--act", "LEARN", "--kind", records.KindCheckpoint,
		"--actor", seedActor, "--body", `{"summary":"s","learnings":["l"],"thread":"th_else"}`)
	if r.code == ExitOK || !strings.Contains(r.stderr, "body.thread") {
		t.Fatalf("mismatched thread: exit %d, stderr %q; want a refusal naming body.thread", r.code, r.stderr)
	}
}
