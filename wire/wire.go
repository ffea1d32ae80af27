// Package wire defines the JSON forms in which spl shows what its log
// holds to programs: the output of the spl command's --json and the
// bodies of the HTTP API of spl serve. Both faces print these types and
// nothing else for a record, a checkpoint, a thread of the thread index, a
// stored message that failed verification and an error, so that the field
// names are written down once. docs/http-api.yaml, and the SDKs in other
// languages, are checked against them: a field name, a field's JSON type,
// or the layout of a time here is part of a public contract and does not
// change.
//
// Every time is a string in [TimeLayout] (UTC, milliseconds), next to the
// same instant in Unix milliseconds. An id that is not known is null,
// never "". A list or a map that is empty is [] or {}, never null.
//
// wire imports only the standard library and records: it is a leaf that
// serve, cmd and sdk use, never the other way round. Types of other
// packages (sdk.ThreadInfo, projections.Thread) are turned into these
// forms next to where they are defined.
package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spl-dev/spl/records"
)

// TimeLayout is the layout of every time in the JSON forms: RFC 3339 in
// UTC with exactly three fractional digits, the milliseconds a record's ts
// holds, "2026-11-21T23:46:52.100Z". Unlike time.RFC3339Nano it keeps
// trailing zeros, so every time has the same shape. FormatTime formats
// with it in UTC, which gives the "Z".
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t in UTC with TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// OptionalID returns id as a string, or nil (JSON null) when id is zero.
func OptionalID(id records.ID) *string {
	if id.IsZero() {
		return nil
	}
	s := id.String()
	return &s
}

// Record is the JSON form of a stored record.
type Record struct {
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
	// Envelope is the record's stored bytes (the canonical CBOR envelope,
	// base64 in JSON), from which a reader checks the id and the body
	// digest itself; only when asked for (HTTP: ?envelope=true), absent
	// otherwise.
	Envelope []byte `json:"envelope,omitempty"`
}

// NewRecord returns the JSON form of r, stored at clock with id.
func NewRecord(id records.ID, clock uint64, r *records.Record) (Record, error) {
	body, err := records.BodyToJSON(r.Body)
	if err != nil {
		return Record{}, fmt.Errorf("record %s: body: %w", id, err)
	}
	j := Header(id, clock, r.Header)
	j.Body = body
	return j, nil
}

// Header returns the JSON form of a record of which only the header is
// known (an erased record), stored at clock with id: body null.
func Header(id records.ID, clock uint64, h records.Header) Record {
	return Record{
		ID:     id.String(),
		Clock:  clock,
		Thread: h.Thread,
		Act:    h.Act,
		Kind:   h.Kind,
		Actor:  h.Actor,
		Time:   FormatTime(time.UnixMilli(h.TS)),
		TS:     h.TS,
		Prev:   OptionalID(h.Prev),
		Body:   json.RawMessage("null"),
	}
}

// Checkpoint is the JSON form of a session checkpoint: the record, and the
// checkpoint's fields lifted out of its body.
type Checkpoint struct {
	Record
	Summary   string   `json:"summary"`
	Learnings []string `json:"learnings"`
	NextSteps []string `json:"next_steps"`
	Name      string   `json:"name"`
	SessionID string   `json:"session_id"`
	// Lineage (wire/lineage.go): null when the body has none.
	Parent     *string         `json:"parent"`
	ForkedFrom *ForkLink       `json:"forked_from"`
	State      json.RawMessage `json:"state"`
}

// NewCheckpoint returns the JSON form of checkpoint r, stored at clock
// with id. cp is its decoded body, or nil to decode it here.
func NewCheckpoint(id records.ID, clock uint64, r *records.Record, cp *records.Checkpoint) (Checkpoint, error) {
	rec, err := NewRecord(id, clock, r)
	if err != nil {
		return Checkpoint{}, err
	}
	if cp == nil {
		if cp, err = records.DecodeCheckpoint(r.Body); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", id, err)
		}
	}
	return Checkpoint{
		Record:     rec,
		Summary:    cp.Summary,
		Learnings:  nonNil(cp.Learnings),
		NextSteps:  nonNil(cp.NextSteps),
		Name:       cp.Name,
		SessionID:  cp.SessionID,
		Parent:     OptionalID(cp.Parent),
		ForkedFrom: NewForkLink(cp.ForkedFrom),
		State:      stateOf(rec.Body),
	}, nil
}

// nonNil makes an absent list print as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Thread is the JSON form of a thread of the thread index: an element of
// the list "spl thread list --json" prints and of the threads GET
// /v1/threads answers. It is a plain struct: sdk.ThreadInfo.Wire fills it
// (ids with OptionalID, the time with FormatTime, absent maps as {}).
type Thread struct {
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
	Kinds       map[string]uint64 `json:"kinds"`     // records per kind; {} when none
	Actors      map[string]uint64 `json:"actors"`    // records per actor; {} when none
}

// Corrupt is the JSON form of a stored message that failed verification:
// where it is and why it does not verify.
type Corrupt struct {
	Clock   uint64 `json:"clock"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// Error is the JSON body of every error answer of the HTTP API. Field and
// Rule are set when the error is about one field of the request (a field
// of a record, a query parameter, a header): its name, and the rule it
// broke.
type Error struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Rule  string `json:"rule,omitempty"`
	// Clock is the thread's newest clock, for a conditional append
	// refused because the thread had moved on (409 on expected_clock).
	Clock *uint64 `json:"clock,omitempty"`
	// Code names a conflict of a run that a runner acts on: ErrorRun*.
	Code string `json:"code,omitempty"`
	// Cancel is the cancel request of a cancelled run (ErrorRunCancelled).
	Cancel *RunCancel `json:"cancel,omitempty"`
	// Recorded, Got and RecordedTool are the input hashes and the tool of
	// an effect whose input differs from the recorded one
	// (ErrorEffectMismatch).
	Recorded     string `json:"recorded,omitempty"`
	Got          string `json:"got,omitempty"`
	RecordedTool string `json:"recorded_tool,omitempty"`
}

// Codes of Error: for runners (409), and a full disk (507).
const (
	// ErrorRunCancelled: someone cancelled the run; stop, and finish it
	// with state "cancelled".
	ErrorRunCancelled = "run_cancelled"
	// ErrorRunFinished: the run has its run_terminal checkpoint.
	ErrorRunFinished = "run_finished"
	// ErrorEffectMismatch: a result of another input is recorded for the
	// call id (the determinism check); rerun runs the tool again.
	ErrorEffectMismatch = "effect_mismatch"
	// ErrorRunNotWaiting: a signal to a run not waiting for it.
	ErrorRunNotWaiting = "run_not_waiting"
	// ErrorDiskFull: the server's disk is full (507); free space there
	// and send the write again.
	ErrorDiskFull = "disk_full"
)
