package serve

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// recordJSON is a stored record in the HTTP API. Its fields are those of
// the CLI's --json output (docs/cli.md), so that one parser reads both.
type recordJSON struct {
	ID     string          `json:"id"`
	Clock  uint64          `json:"clock"`
	Thread string          `json:"thread"`
	Act    string          `json:"act"`
	Kind   string          `json:"kind"`
	Actor  string          `json:"actor"`
	Time   string          `json:"time"` // RFC 3339 with nanoseconds, UTC
	TS     int64           `json:"ts"`   // Unix milliseconds
	Prev   *string         `json:"prev"` // null on the first record of a thread
	Body   json.RawMessage `json:"body"`
}

// checkpointJSON is a session checkpoint: the record, and the fields of
// the checkpoint lifted out of its body.
type checkpointJSON struct {
	recordJSON
	Summary   string   `json:"summary"`
	Learnings []string `json:"learnings"`
	NextSteps []string `json:"next_steps"`
	Name      string   `json:"name"`
	SessionID string   `json:"session_id"`
}

// corruptJSON is a stored message that failed verification.
type corruptJSON struct {
	Clock   uint64 `json:"clock"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

func newRecordJSON(e log.Entry) (recordJSON, error) {
	body, err := records.BodyToJSON(e.Record.Body)
	if err != nil {
		return recordJSON{}, fmt.Errorf("record %s: body: %w", e.ID, err)
	}
	h := e.Record.Header
	j := recordJSON{
		ID:     e.ID.String(),
		Clock:  e.Clock,
		Thread: h.Thread,
		Act:    h.Act,
		Kind:   h.Kind,
		Actor:  h.Actor,
		Time:   time.UnixMilli(h.TS).UTC().Format(time.RFC3339Nano),
		TS:     h.TS,
		Body:   body,
	}
	if !h.Prev.IsZero() {
		prev := h.Prev.String()
		j.Prev = &prev
	}
	return j, nil
}

func newCheckpointJSON(e log.Entry) (checkpointJSON, error) {
	rec, err := newRecordJSON(e)
	if err != nil {
		return checkpointJSON{}, err
	}
	c, err := records.DecodeCheckpoint(e.Record.Body)
	if err != nil {
		return checkpointJSON{}, fmt.Errorf("checkpoint %s: %w", e.ID, err)
	}
	return checkpointJSON{
		recordJSON: rec,
		Summary:    c.Summary,
		Learnings:  nonNil(c.Learnings),
		NextSteps:  nonNil(c.NextSteps),
		Name:       c.Name,
		SessionID:  c.SessionID,
	}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// slogLevel is the level an HTTP answer is logged at.
func slogLevel(code int) slog.Level {
	switch {
	case code >= 500:
		return slog.LevelWarn
	case code >= 400:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}
