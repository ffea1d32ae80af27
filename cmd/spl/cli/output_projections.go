package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// kindsWidth is the width of the kinds cell of "thread list".
const kindsWidth = 60

// kindsCell lists the kinds of a thread, most records first: "agent.step 3,
// agent.session.checkpoint 1".
func kindsCell(kinds map[string]uint64) string {
	type kc struct {
		kind string
		n    uint64
	}
	ks := make([]kc, 0, len(kinds))
	for k, n := range kinds {
		ks = append(ks, kc{k, n})
	}
	slices.SortFunc(ks, func(a, b kc) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.kind, b.kind)) })
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k.kind, k.n)
	}
	return cell(strings.Join(parts, ", "), kindsWidth)
}

// threadWidth is the width of a thread cell: a thread name is at most
// 256 bytes, so it is never cut, and can be copied into other commands.
const threadWidth = 256

// writeThreadTable writes the table of "thread list".
func writeThreadTable(w io.Writer, ts []sdk.ThreadInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "LAST ACTIVE\tTHREAD\tRECORDS\tCHECKPOINTS\tLAST ACTOR\tKINDS")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n",
			tableTime(t.LastActive.UnixMilli()), cell(t.Thread, threadWidth), t.Records, t.Checkpoints,
			cell(t.LastActor, actorWidth), kindsCell(t.Kinds))
	}
	return tw.Flush()
}

// latestJSON is an element of "session list --json" without --thread: the
// latest checkpoint of a thread, as the checkpoint index holds it.
type latestJSON = wire.LatestCheckpoint

func newLatestJSON(c sdk.CheckpointInfo) latestJSON {
	return c.Wire()
}

// writeLatestTable writes the table of "session list" across threads.
func writeLatestTable(w io.Writer, cps []sdk.CheckpointInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CLOCK\tTIME\tTHREAD\tACTOR\tID\tNAME\tSUMMARY")
	for _, c := range cps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			c.Clock, tableTime(c.Time.UnixMilli()), cell(c.Thread, threadWidth), cell(c.Actor, actorWidth),
			c.ID.Short(), cell(c.Name, nameWidth), cell(c.Summary, summaryWidth))
	}
	return tw.Flush()
}

// statusJSON is an element of "projections status --json".
type statusJSON struct {
	Name        string `json:"name"`
	Position    uint64 `json:"position"`     // every record up to this clock is applied
	LogClock    uint64 `json:"log_clock"`    // the newest clock of the log
	Lag         uint64 `json:"lag"`          // records after the position
	LagMS       int64  `json:"lag_ms"`       // how long the oldest of them has waited
	Corrupt     uint64 `json:"corrupt"`      // messages skipped: they do not verify
	LastCorrupt uint64 `json:"last_corrupt"` // the clock of the last of them (0: none)
	Holder      string `json:"holder"`       // the process applying it, "" when none
	RebuildTo   uint64 `json:"rebuild_to"`   // while a rebuild runs, its end; else 0
	Updated     string `json:"updated"`      // wire.TimeLayout, UTC; "" when never stored
}

func newStatusJSON(s sdk.ProjectionStatus) statusJSON {
	j := statusJSON{
		Name: s.Name, Position: s.Clock, LogClock: s.LogClock, Lag: s.Lag, LagMS: s.LagTime.Milliseconds(),
		Corrupt: s.Corrupt, LastCorrupt: s.LastCorrupt, Holder: s.Holder, RebuildTo: s.RebuildTo,
	}
	if !s.Updated.IsZero() {
		j.Updated = wire.FormatTime(s.Updated)
	}
	return j
}

// writeStatusTable writes the table of "projections status".
func writeStatusTable(w io.Writer, ss []sdk.ProjectionStatus) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tPOSITION\tLOG CLOCK\tLAG\tLAG TIME\tCORRUPT\tHOLDER\tREBUILDING\tUPDATED")
	for _, s := range ss {
		rebuilding, updated := "-", "-"
		if s.RebuildTo > 0 {
			rebuilding = fmt.Sprintf("to %d", s.RebuildTo)
		}
		if !s.Updated.IsZero() {
			updated = tableTime(s.Updated.UnixMilli())
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n",
			s.Name, s.Clock, s.LogClock, s.Lag, lagTime(s.LagTime), s.Corrupt,
			cell(s.Holder, 60), rebuilding, updated)
	}
	return tw.Flush()
}

// lagTime shows a lag: to the millisecond under a second, else to the
// second.
func lagTime(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// writeJSONLine writes v as one line of compact JSON (JSON Lines), for
// output that streams: "thread tail --follow --json".
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// lineTable prints a table one row at a time, aligned as tabwriter aligns
// a whole table (two spaces between columns): for output that streams. A
// row wider than the ones before widens its column from then on.
type lineTable struct {
	w      io.Writer
	widths []int
}

// fit widens the columns for rows, without printing them.
func (t *lineTable) fit(rows ...[]string) {
	for _, r := range rows {
		for i, c := range r[:len(r)-1] { // the last cell is not padded
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		}
	}
}

// line prints one row.
func (t *lineTable) line(r []string) error {
	t.fit(r)
	var b strings.Builder
	for i, c := range r {
		b.WriteString(c)
		if i < len(r)-1 {
			b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)+2))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(t.w, b.String())
	return err
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// rebuildProgress shows the progress of a rebuild on w: a bar rewritten
// in place on a terminal, else a plain line at most every second.
type rebuildProgress struct {
	w     io.Writer
	name  string
	tty   bool
	now   func() time.Time
	every time.Duration // between two updates

	started               bool      // an update was shown
	last                  time.Time // when
	done, total           uint64    // the last reported
	shownDone, shownTotal uint64    // the last shown
}

func newRebuildProgress(w io.Writer, name string, now func() time.Time) *rebuildProgress {
	p := &rebuildProgress{w: w, name: name, tty: isTerminal(w), now: now, every: time.Second}
	if p.tty {
		p.every = 100 * time.Millisecond
	}
	return p
}

// update is the progress callback of the rebuild: done of total clocks.
func (p *rebuildProgress) update(done, total uint64) {
	p.done, p.total = done, total
	now := p.now()
	if p.started {
		if done == p.shownDone && total == p.shownTotal {
			return
		}
		if done < total && now.Sub(p.last) < p.every {
			return
		}
	}
	p.started, p.last, p.shownDone, p.shownTotal = true, now, done, total
	if !p.tty {
		fmt.Fprintf(p.w, "rebuild %s: %d/%d records\n", p.name, done, total)
		return
	}
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	if fill > 0 && fill < width {
		bar = strings.Repeat("=", fill-1) + ">" + strings.Repeat(" ", width-fill)
	}
	fmt.Fprintf(p.w, "\rrebuild %s [%s] %3.0f%% %d/%d records", p.name, bar, 100*frac, done, total)
}

// finish ends the bar's line on a terminal.
func (p *rebuildProgress) finish() {
	if p.tty && p.started {
		fmt.Fprintln(p.w)
	}
}
