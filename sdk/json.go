package sdk

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
)

// TimeLayout is the layout of every time in the JSON forms (the spl
// command's --json output and the HTTP API of spl serve): RFC 3339 in UTC
// with exactly three fractional digits, the milliseconds a record's ts
// holds, "2026-11-21T23:46:52.100Z". Unlike time.RFC3339Nano it keeps
// trailing zeros, so every time has the same shape. FormatTime formats
// with it in UTC, which gives the "Z".
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t in UTC with TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// RecordJSON is the JSON form of a stored record: the one the spl
// command prints with --json and the HTTP API of spl serve answers with.
// Its field names are part of both contracts.
type RecordJSON struct {
	ID     string          `json:"id"`
	Clock  uint64          `json:"clock"`
	Thread string          `json:"thread"`
	Act    string          `json:"act"`
	Kind   string          `json:"kind"`
	Actor  string          `json:"actor"`
	Time   string          `json:"time"` // UTC, in TimeLayout
	TS     int64           `json:"ts"`   // Unix milliseconds
	Prev   *string         `json:"prev"` // null on the first record of a thread
	Body   json.RawMessage `json:"body"`
}

// CheckpointJSON is the JSON form of a session checkpoint: the record, and
// the checkpoint's fields lifted out of its body.
type CheckpointJSON struct {
	RecordJSON
	Summary   string   `json:"summary"`
	Learnings []string `json:"learnings"`
	NextSteps []string `json:"next_steps"`
	Name      string   `json:"name"`
	SessionID string   `json:"session_id"`
}

// NewRecordJSON returns the JSON form of r, stored at clock with id.
func NewRecordJSON(id records.ID, clock uint64, r *records.Record) (RecordJSON, error) {
	body, err := records.BodyToJSON(r.Body)
	if err != nil {
		return RecordJSON{}, fmt.Errorf("record %s: body: %w", id, err)
	}
	j := HeaderJSON(id, clock, r.Header)
	j.Body = body
	return j, nil
}

// HeaderJSON returns the JSON form of a record of which only the header
// is known (an erased record), stored at clock with id: body null.
func HeaderJSON(id records.ID, clock uint64, h records.Header) RecordJSON {
	j := RecordJSON{
		ID:     id.String(),
		Clock:  clock,
		Thread: h.Thread,
		Act:    h.Act,
		Kind:   h.Kind,
		Actor:  h.Actor,
		Time:   FormatTime(time.UnixMilli(h.TS)),
		TS:     h.TS,
		Body:   json.RawMessage("null"),
	}
	if !h.Prev.IsZero() {
		prev := h.Prev.String()
		j.Prev = &prev
	}
	return j
}

// NewCheckpointJSON returns the JSON form of checkpoint r, stored at clock
// with id. cp is its decoded body, or nil to decode it here.
func NewCheckpointJSON(id records.ID, clock uint64, r *records.Record, cp *records.Checkpoint) (CheckpointJSON, error) {
	rec, err := NewRecordJSON(id, clock, r)
	if err != nil {
		return CheckpointJSON{}, err
	}
	if cp == nil {
		if cp, err = records.DecodeCheckpoint(r.Body); err != nil {
			return CheckpointJSON{}, fmt.Errorf("checkpoint %s: %w", id, err)
		}
	}
	return CheckpointJSON{
		RecordJSON: rec,
		Summary:    cp.Summary,
		Learnings:  nonNil(cp.Learnings),
		NextSteps:  nonNil(cp.NextSteps),
		Name:       cp.Name,
		SessionID:  cp.SessionID,
	}, nil
}

// nonNil makes an absent list print as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ThreadJSON is the JSON form of a thread of the thread index: an element
// of the list the spl command prints with thread list --json and of the
// threads the HTTP API of spl serve lists. Its field names are part of
// both contracts.
type ThreadJSON struct {
	Thread      string            `json:"thread"`
	Records     uint64            `json:"records"`
	Checkpoints uint64            `json:"checkpoints"`
	FirstClock  uint64            `json:"first_clock"` // 0 when unknown
	FirstID     *string           `json:"first_id"`    // null when unknown
	LastClock   uint64            `json:"last_clock"`
	LastID      *string           `json:"last_id"`
	LastActor   string            `json:"last_actor"`
	LastTime    string            `json:"last_time"` // UTC, in TimeLayout: the last activity
	LastTS      int64             `json:"last_ts"`   // the same in Unix milliseconds
	Kinds       map[string]uint64 `json:"kinds"`
	Actors      map[string]uint64 `json:"actors"`
}

// NewThreadJSON returns the JSON form of t.
func NewThreadJSON(t ThreadInfo) ThreadJSON {
	j := ThreadJSON{
		Thread: t.Thread, Records: t.Records, Checkpoints: t.Checkpoints,
		FirstClock: t.First, LastClock: t.Last, LastActor: t.LastActor,
		LastTime: FormatTime(t.LastActive), LastTS: t.LastActive.UnixMilli(),
		Kinds: nonNilMap(t.Kinds), Actors: nonNilMap(t.Actors),
	}
	if !t.FirstID.IsZero() {
		s := t.FirstID.String()
		j.FirstID = &s
	}
	if !t.LastID.IsZero() {
		s := t.LastID.String()
		j.LastID = &s
	}
	return j
}

// NewThreadJSONFromIndex returns the JSON form of t, a value of the thread
// index as a projections.Reader reads it: the form NewThreadJSON gives the
// ThreadInfo that Client.Threads makes of it.
func NewThreadJSONFromIndex(t *projections.Thread) ThreadJSON {
	return NewThreadJSON(threadInfo(t))
}

// nonNilMap makes an absent map print as {} rather than null.
func nonNilMap(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return map[string]uint64{}
	}
	return m
}
