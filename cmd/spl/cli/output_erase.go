package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// erasedJSON says who erased a record, when and why: the "erased" field
// of a tombstone.
type erasedJSON struct {
	By     string `json:"by"`    // id of the erasure record
	Clock  uint64 `json:"clock"` // clock of the erasure record
	Actor  string `json:"actor"`
	Time   string `json:"time"`
	Reason string `json:"reason"`
}

// tailJSON is an element of "thread tail --json": a record, or with
// --tombstones an erased record (body null, "erased" set).
type tailJSON struct {
	wire.Record
	Erased *erasedJSON `json:"erased,omitempty"`
}

// shownJSON is what "record show --json" prints.
type shownJSON struct {
	tailJSON
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"` // why it does not verify
}

// receiptRef is a record's id and clock.
type receiptRef = wire.Receipt

// eraseJSON is what "erase --json" prints.
type eraseJSON = wire.Erase

// verifyJSON is what "verify --json" prints.
type verifyJSON struct {
	OK      bool          `json:"ok"`
	Threads int           `json:"threads"`
	Checked int           `json:"checked"`
	Erased  []erasedRef   `json:"erased"`
	Corrupt []problemJSON `json:"corrupt"`
	Missing []problemJSON `json:"missing"`
	Loss    *lossJSON     `json:"loss,omitempty"`

	Signed        int       `json:"signed"`
	UnsignedCount int       `json:"unsigned_count"`
	Unsigned      []sigJSON `json:"unsigned"` // the first 100
	BadSig        []sigJSON `json:"bad_signatures"`
}

// sigJSON is a record whose signature failed, or that is unsigned.
type sigJSON struct {
	Clock  uint64 `json:"clock"`
	ID     string `json:"id"`
	Thread string `json:"thread"`
	Actor  string `json:"actor"`
	Key    string `json:"key,omitempty"`
	Bound  string `json:"bound_key,omitempty"`
	Reason string `json:"reason"`
}

// lossJSON is a log behind its high-water mark.
type lossJSON struct {
	From      uint64 `json:"from"`
	To        uint64 `json:"to"`
	MarkClock uint64 `json:"mark_clock"`
	MarkID    string `json:"mark_id"`
	LastClock uint64 `json:"last_clock"`
	Reason    string `json:"reason"`
}

type erasedRef struct {
	ID       string `json:"id"`
	Clock    uint64 `json:"clock"`
	Thread   string `json:"thread"`
	ErasedBy string `json:"erased_by"`
	Reason   string `json:"reason"`
}

type problemJSON struct {
	Clock   uint64  `json:"clock"`
	Subject string  `json:"subject"`
	ID      *string `json:"id"` // null when unknown
	Reason  string  `json:"reason"`
}

func idStrings(ids []records.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func receiptRefs(rs []sdk.Receipt) []receiptRef {
	out := make([]receiptRef, len(rs))
	for i, r := range rs {
		out[i] = receiptRef{ID: r.ID.String(), Clock: r.Clock}
	}
	return out
}

func newEraseJSON(thread string, res sdk.EraseResult) eraseJSON {
	return res.Wire(thread)
}

func newVerifyJSON(rep sdk.VerifyReport, requireSigned bool) verifyJSON {
	j := verifyJSON{OK: rep.OKSigned(requireSigned), Threads: rep.Threads, Checked: rep.Checked,
		Erased: []erasedRef{}, Corrupt: []problemJSON{}, Missing: []problemJSON{},
		Signed: rep.Signed, UnsignedCount: rep.UnsignedCount, Unsigned: []sigJSON{}, BadSig: []sigJSON{}}
	for _, l := range []struct {
		dst *[]sigJSON
		src []sdk.SigProblem
	}{{&j.Unsigned, rep.Unsigned}, {&j.BadSig, rep.BadSig}} {
		for _, p := range l.src {
			id := ""
			if !p.ID.IsZero() {
				id = p.ID.String()
			}
			*l.dst = append(*l.dst, sigJSON{Clock: p.Clock, ID: id, Thread: p.Thread, Actor: p.Actor, Key: p.Key, Bound: p.Bound, Reason: p.Reason})
		}
	}
	if l := rep.Loss; l != nil {
		j.Loss = &lossJSON{From: l.From, To: l.To, MarkClock: l.Mark.Clock, MarkID: l.Mark.ID, LastClock: l.LastClock, Reason: l.Reason}
	}
	for _, e := range rep.Erased {
		j.Erased = append(j.Erased, erasedRef{ID: e.ID.String(), Clock: e.Clock, Thread: e.Thread, ErasedBy: e.ErasedBy.String(), Reason: e.Reason})
	}
	for _, l := range []struct {
		dst *[]problemJSON
		src []sdk.VerifyProblem
	}{{&j.Corrupt, rep.Corrupt}, {&j.Missing, rep.Missing}} {
		for _, p := range l.src {
			pj := problemJSON{Clock: p.Clock, Subject: p.Subject, Reason: p.Reason}
			if !p.ID.IsZero() {
				id := p.ID.String()
				pj.ID = &id
			}
			*l.dst = append(*l.dst, pj)
		}
	}
	return j
}

func newErasedJSON(t sdk.Tombstone) *erasedJSON {
	return &erasedJSON{By: t.ErasedBy.ID.String(), Clock: t.ErasedBy.Clock, Actor: t.Actor,
		Time: wire.FormatTime(t.Time), Reason: t.Reason}
}

func newTombstoneJSON(t sdk.Tombstone) tailJSON {
	return tailJSON{Record: wire.Header(t.ID, t.Clock, t.Header), Erased: newErasedJSON(t)}
}

func newShownJSON(r sdk.Record, corrupt error, ts *sdk.Tombstone) (shownJSON, error) {
	switch {
	case ts != nil:
		return shownJSON{tailJSON: newTombstoneJSON(*ts), Verified: true}, nil
	case corrupt != nil:
		j := shownJSON{Problem: problemOf(corrupt)}
		if r.Record == nil {
			j.Record = wire.Record{ID: r.ID.String(), Clock: r.Clock, Body: json.RawMessage("null")}
			return j, nil
		}
		j.Record = wire.Header(r.ID, r.Clock, r.Header)
		if body, err := records.BodyToJSON(r.Body); err == nil {
			j.Body = body
		}
		return j, nil
	}
	rec, err := newRecordJSON(r)
	if err != nil {
		return shownJSON{}, err
	}
	return shownJSON{tailJSON: tailJSON{Record: rec}, Verified: true}, nil
}

// problemOf says why a record does not verify, without the error's
// wrapping.
func problemOf(err error) string {
	var ce *sdk.CorruptError
	if errors.As(err, &ce) {
		if ce.Err != nil {
			return ce.Reason + ": " + ce.Err.Error()
		}
		return ce.Reason
	}
	return err.Error()
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// writeShown writes a record in full for "record show", then whether it
// verifies, or who erased it.
func writeShown(w io.Writer, r sdk.Record, corrupt error, ts *sdk.Tombstone) error {
	var b strings.Builder
	field := func(label, value string) { writeField(&b, label, value) }
	header := func(h records.Header) {
		field("thread", h.Thread)
		field("act", h.Act)
		field("kind", h.Kind)
		field("actor", h.Actor)
		field("time", time.UnixMilli(h.TS).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		field("prev", idOrDash(h.Prev))
	}
	field("id", r.ID.String())
	field("clock", fmt.Sprint(r.Clock))
	switch {
	case ts != nil:
		header(ts.Header)
		field("body", "- (erased)")
		field("erased", fmt.Sprintf("by %s at %s: %s", ts.ErasedBy.ID, tableTime(ts.Time.UnixMilli()), ts.Reason))
		field("erased by", ts.Actor)
	case r.Record != nil:
		header(r.Header)
		body, err := records.BodyToJSON(r.Body)
		if err != nil {
			field("body", fmt.Sprintf("- (%v)", err))
		} else {
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				pretty.Reset()
				pretty.Write(body)
			}
			field("body", pretty.String())
		}
	}
	if ts == nil {
		if corrupt != nil {
			field("verified", "no: "+problemOf(corrupt))
		} else {
			field("verified", "ok")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tombstoneWidth is the width of the body cell of a tombstone in the
// tail table: wider than a body's, so the reason is seldom cut.
const tombstoneWidth = 120

// tailHeader is the header of the "thread tail" table.
var tailHeader = []string{"CLOCK", "TIME", "ACT", "KIND", "ACTOR", "ID", "BODY"}

// recordCells is the row of a record in the "thread tail" table.
func recordCells(r sdk.Record) ([]string, error) {
	body, err := records.BodyToJSON(r.Body)
	if err != nil {
		return nil, fmt.Errorf("record %s: body: %w", r.ID, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return nil, fmt.Errorf("record %s: body: %w", r.ID, err)
	}
	h := r.Header
	return []string{fmt.Sprint(r.Clock), tableTime(h.TS), cell(h.Act, 16), cell(h.Kind, 40), cell(h.Actor, actorWidth),
		r.ID.Short(), cell(compact.String(), bodyWidth)}, nil
}

// tombstoneCells is the row of an erased record in the "thread tail"
// table: its header, and who erased it, when and why.
func tombstoneCells(t sdk.Tombstone) []string {
	h := t.Header
	what := fmt.Sprintf("[erased by %s at %s: %s]", t.ErasedBy.ID.Short(), tableTime(t.Time.UnixMilli()), t.Reason)
	return []string{fmt.Sprint(t.Clock), tableTime(h.TS), cell(h.Act, 16), cell(h.Kind, 40), cell(h.Actor, actorWidth),
		t.ID.Short(), cell(what, tombstoneWidth)}
}

// tailRows returns the rows of the records and tombstones, in clock order.
func tailRows(recs []sdk.Record, tombs []sdk.Tombstone) ([][]string, error) {
	type row struct {
		clock uint64
		cells []string
	}
	rows := make([]row, 0, len(recs)+len(tombs))
	for _, r := range recs {
		cells, err := recordCells(r)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{r.Clock, cells})
	}
	for _, t := range tombs {
		rows = append(rows, row{t.Clock, tombstoneCells(t)})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].clock < rows[j].clock })
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = r.cells
	}
	return out, nil
}

// writeTailTable writes the table of "thread tail": the records and, in
// clock order among them, the tombstones of erased records.
func writeTailTable(w io.Writer, recs []sdk.Record, tombs []sdk.Tombstone) error {
	rows, err := tailRows(recs, tombs)
	if err != nil {
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, strings.Join(tailHeader, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
