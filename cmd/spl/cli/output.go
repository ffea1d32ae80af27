package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// receiptJSON is the --json form of what emit and session save print.
type receiptJSON struct {
	ID     string `json:"id"`
	Clock  uint64 `json:"clock"`
	Thread string `json:"thread"`
	Act    string `json:"act"`
	Kind   string `json:"kind"`
	Actor  string `json:"actor"`
}

// newRecordJSON and newCheckpointJSON give the --json forms of a record
// and of a checkpoint, the forms the HTTP API of spl serve answers with.
func newRecordJSON(r sdk.Record) (wire.Record, error) {
	return wire.NewRecord(r.ID, r.Clock, r.Record)
}

func newCheckpointJSON(cp sdk.SavedCheckpoint) (wire.Checkpoint, error) {
	return wire.NewCheckpoint(cp.ID, cp.Clock, cp.Record.Record, cp.Checkpoint)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Widths, in characters, of the free-text columns of the tables.
const (
	summaryWidth = 60
	bodyWidth    = 60
	nameWidth    = 24
	actorWidth   = 40
)

// checkpointOf returns the decoded checkpoint of cp, decoding the body if
// the client did not.
func checkpointOf(cp sdk.SavedCheckpoint) (*records.Checkpoint, error) {
	if cp.Checkpoint != nil {
		return cp.Checkpoint, nil
	}
	c, err := records.DecodeCheckpoint(cp.Body)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cp.ID, err)
	}
	return c, nil
}

// tableTime is how tables show a record's time: UTC, to the second.
func tableTime(ts int64) string {
	return time.UnixMilli(ts).UTC().Format("2006-01-02T15:04:05Z")
}

// writeCheckpointTable writes the table of "session list", ages
// measured at now; step and progress as the body carries them
// (sdk.FactsOf).
func writeCheckpointTable(w io.Writer, cps []sdk.SavedCheckpoint, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLOCK\tTIME\tAGE\tACTOR\tID\tNAME\tSTEP\tPROGRESS\tSUMMARY")
	for _, cp := range cps {
		c, err := checkpointOf(cp)
		if err != nil {
			return err
		}
		f := sdk.FactsOf(c)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			cp.Clock, tableTime(cp.Header.TS), ago(now, time.UnixMilli(cp.Header.TS)), cell(cp.Header.Actor, actorWidth), cp.ID.Short(),
			cell(c.Name, nameWidth), cell(f.Step, nameWidth), cell(f.Progress, 12), cell(c.Summary, summaryWidth))
	}
	return tw.Flush()
}

// writeRecordTable writes the table of "thread tail".
func writeRecordTable(w io.Writer, recs []sdk.Record) error {
	return writeTailTable(w, recs, nil)
}

// writeCheckpoint writes a checkpoint in full, for "session show".
func writeCheckpoint(w io.Writer, cp sdk.SavedCheckpoint) error {
	c, err := checkpointOf(cp)
	if err != nil {
		return err
	}
	var b strings.Builder
	field := func(label, value string) { writeField(&b, label, value) }
	list := func(label string, items []string) {
		if len(items) == 0 {
			field(label, "-")
			return
		}
		for _, item := range items {
			field(label, "- "+strings.ReplaceAll(item, "\n", "\n  "))
			label = ""
		}
	}
	h := cp.Header
	field("thread", h.Thread)
	field("summary", c.Summary)
	list("learnings", c.Learnings)
	list("next steps", c.NextSteps)
	field("actor", h.Actor)
	field("time", time.UnixMilli(h.TS).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	field("id", cp.ID.String())
	field("clock", fmt.Sprint(cp.Clock))
	field("name", orDash(c.Name))
	field("session id", orDash(c.SessionID))
	field("parent", idOrDash(c.Parent))
	if f := c.ForkedFrom; f != nil {
		field("forked from", fmt.Sprintf("%s at %s (clock %d)", f.Thread, f.ID, f.Clock))
	}
	body := cp.Body
	if body == nil { // built in memory, not read
		if body, err = c.MarshalCBOR(); err != nil {
			return fmt.Errorf("checkpoint %s: %w", cp.ID, err)
		}
	}
	if err := writeBodyRest(&b, body); err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.ID, err)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable replaces control characters other than newlines by spaces, so
// that stored text cannot move the cursor or recolour a terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// cell fits free text into a table cell: one line, no control characters,
// at most width characters ("…" marks a cut). An empty cell is "-".
func cell(s string, width int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		return "-"
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	runes := []rune(s)
	return strings.TrimRightFunc(string(runes[:width-1]), unicode.IsSpace) + "…"
}

// writeField writes one labelled field of a detail view: the label in a
// column of 12, and a value of several lines continued under it.
func writeField(b *strings.Builder, label, value string) {
	for i, line := range strings.Split(printable(value), "\n") {
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(b, "%-12s%s\n", label, line)
	}
}
