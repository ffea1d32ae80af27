package serve

import (
	"log/slog"

	"github.com/spl-dev/spl/sdk"
)

// recordJSON, checkpointJSON and threadJSON are the forms of a record, a
// checkpoint and a thread of the thread index in the HTTP API: the same as
// the CLI's --json (sdk.RecordJSON, sdk.ThreadJSON).
type (
	recordJSON     = sdk.RecordJSON
	checkpointJSON = sdk.CheckpointJSON
	threadJSON     = sdk.ThreadJSON
)

// corruptJSON is a stored message that failed verification.
type corruptJSON struct {
	Clock   uint64 `json:"clock"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

func newRecordJSON(e sdk.Record) (recordJSON, error) {
	return sdk.NewRecordJSON(e.ID, e.Clock, e.Record)
}

func newCheckpointJSON(e sdk.Record) (checkpointJSON, error) {
	return sdk.NewCheckpointJSON(e.ID, e.Clock, e.Record, nil)
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
