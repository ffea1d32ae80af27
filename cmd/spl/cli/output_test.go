package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// fixedID returns an id whose bytes are all b, so that output is the same
// on every run.
func fixedID(b byte) records.ID {
	var id records.ID
	for i := range id {
		id[i] = b
	}
	return id
}

var fixedTime = time.Date(2025, 11, 21, 22, 46, 0, 123e6, time.UTC)

// fixedCheckpoints are three checkpoints of one thread, as the client
// would return them, with fixed ids and times.
func fixedCheckpoints() []sdk.SavedCheckpoint {
	cps := []*records.Checkpoint{
		{
			Summary:   "Completed auth refactor; next: migration tests",
			Learnings: []string{"mutex pattern worked", "refactor touched 14 files"},
			NextSteps: []string{"Write migration tests"},
		},
		{
			Summary:   "Migration tests written for every table of the auth schema, including the legacy sessions table",
			Learnings: []string{"legacy rows have no tenant\nbackfill them first"},
			Name:      "migrations-done",
			SessionID: "sess-0002",
			Parent:    fixedID(0x10),
			State: map[string]any{
				"current_phase": "3", "step_number": uint64(5),
				"todos": []any{map[any]any{"content": "Write tests", "status": "pending"}},
			},
			Extra: map[string]any{"metadata": map[any]any{"estimated_completion": "45%", "trigger": "phase_complete"}},
		},
		{
			Summary:   "Line one\nline two\ttabbed",
			Learnings: []string{"x"},
		},
	}
	out := make([]sdk.SavedCheckpoint, len(cps))
	var prev records.ID
	for i, cp := range cps {
		id := fixedID(byte(0x10 * (i + 1)))
		out[i] = sdk.SavedCheckpoint{
			Record: sdk.Record{
				ID:    id,
				Clock: uint64(7 + 3*i),
				Record: &records.Record{Header: records.Header{
					V:      records.FormatVersion,
					Act:    records.ActLearn,
					Kind:   records.KindCheckpoint,
					Thread: "th_auth_refactor_abc123",
					Actor:  []string{"did:sync:agent:dev", "did:sync:agent:reviewer"}[i%2],
					TS:     fixedTime.Add(time.Duration(i) * 90 * time.Minute).UnixMilli(),
					Prev:   prev,
				}},
			},
			Checkpoint: cp,
		}
		prev = id
	}
	return out
}

func TestCheckpointTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeCheckpointTable(&b, fixedCheckpoints(), fixedTime.Add(5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	golden(t, "session_list.golden", b.String())
}

func TestCheckpointShow(t *testing.T) {
	var b bytes.Buffer
	for _, cp := range fixedCheckpoints()[:2] {
		if err := writeCheckpoint(&b, cp); err != nil {
			t.Fatal(err)
		}
		b.WriteString("--\n")
	}
	golden(t, "session_show.golden", b.String())
}

func TestRecordTable(t *testing.T) {
	bodies := []string{
		`{"step": 1, "tool": "grep"}`,
		`{"note": "a long body that goes on and on past the width of the body column of the table"}`,
		`{}`,
	}
	var recs []sdk.Record
	for i, js := range bodies {
		body, err := records.BodyFromJSON([]byte(js))
		if err != nil {
			t.Fatalf("BodyFromJSON(%s): %v", js, err)
		}
		recs = append(recs, sdk.Record{
			ID:    fixedID(byte(0x21 * (i + 1))),
			Clock: uint64(100 + i),
			Record: &records.Record{
				Header: records.Header{
					V:      records.FormatVersion,
					Act:    []string{records.ActKnow, records.ActDo, records.ActSay}[i],
					Kind:   "agent.step",
					Thread: "th_e",
					Actor:  "did:sync:agent:dev",
					TS:     fixedTime.Add(time.Duration(i) * time.Second).UnixMilli(),
				},
				Body: body,
			},
		})
	}
	var b bytes.Buffer
	if err := writeRecordTable(&b, recs); err != nil {
		t.Fatal(err)
	}
	golden(t, "thread_tail.golden", b.String())
}
