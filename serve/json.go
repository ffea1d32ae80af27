package serve

import (
	"log/slog"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// The HTTP API answers with the JSON forms of package wire, the same as
// the spl command's --json.

func newRecordJSON(e sdk.Record) (wire.Record, error) {
	return wire.NewRecord(e.ID, e.Clock, e.Record)
}

func newCheckpointJSON(e sdk.Record) (wire.Checkpoint, error) {
	return wire.NewCheckpoint(e.ID, e.Clock, e.Record, nil)
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
