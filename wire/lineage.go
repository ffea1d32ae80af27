package wire

import (
	"encoding/json"

	"github.com/spl-dev/spl/records"
)

// ForkLink is the JSON form of a checkpoint's forked_from: the checkpoint
// of another thread a fork started from.
type ForkLink struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`
	Clock  uint64 `json:"clock"`
}

// NewForkLink returns the JSON form of l, nil for none.
func NewForkLink(l *records.ForkLink) *ForkLink {
	if l == nil {
		return nil
	}
	return &ForkLink{Thread: l.Thread, ID: l.ID.String(), Clock: l.Clock}
}

// stateOf picks the "state" of a body's JSON form: null when absent.
func stateOf(body json.RawMessage) json.RawMessage {
	var b struct {
		State json.RawMessage `json:"state"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.State) == 0 {
		return json.RawMessage("null")
	}
	return b.State
}

// CheckpointListing is an element of a thread's checkpoint list (spl
// session list --thread --json, GET /v1/threads/{thread}/checkpoints):
// the checkpoint, and the facts a listing shows.
type CheckpointListing struct {
	Checkpoint
	Step     string `json:"step"`     // "" when the body has none
	Progress string `json:"progress"` // "" when the body has none
	IsClean  *bool  `json:"is_clean"` // null when the body has none
}

// LineageNode is one node of a thread's lineage.
type LineageNode struct {
	Type          string    `json:"type"` // checkpoint, resume, fork, erased
	ID            string    `json:"id"`
	Clock         uint64    `json:"clock"`
	Time          string    `json:"time"`
	TS            int64     `json:"ts"`
	Actor         string    `json:"actor"`
	Parent        *string   `json:"parent"`         // null for a root
	ImpliedParent bool      `json:"implied_parent"` // the body names none: parent is the one a save would have given it then
	Name          string    `json:"name"`           // checkpoint
	Summary       string    `json:"summary"`        // checkpoint
	ForkedFrom    *ForkLink `json:"forked_from"`    // checkpoint that starts a fork
	ToThread      string    `json:"to_thread"`      // fork
	ToID          *string   `json:"to_id"`          // fork
	ErasedBy      *string   `json:"erased_by"`      // erased
	Reason        string    `json:"reason"`         // erased
}

// Lineage is the JSON form of a thread's lineage: its nodes in clock
// order, each naming its parent.
type Lineage struct {
	Thread     string        `json:"thread"`
	ForkedFrom *ForkLink     `json:"forked_from"` // null unless the thread is a fork
	Nodes      []LineageNode `json:"nodes"`
	Corrupt    []uint64      `json:"corrupt"` // clocks left out: they did not verify
}

// CheckpointRef names a checkpoint: where it is.
type CheckpointRef struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`
	Clock  uint64 `json:"clock"`
}

// DiffChange is one change of a Diff.
type DiffChange struct {
	Op   string          `json:"op"` // added, removed, changed
	Path string          `json:"path"`
	Old  json.RawMessage `json:"old,omitempty"` // absent for added
	New  json.RawMessage `json:"new,omitempty"` // absent for removed
}

// Diff is the JSON form of the structured difference of two checkpoints.
type Diff struct {
	A       CheckpointRef `json:"a"`
	B       CheckpointRef `json:"b"`
	Changes []DiffChange  `json:"changes"`
}

// Receipt says where a record landed.
type Receipt struct {
	ID    string `json:"id"`
	Clock uint64 `json:"clock"`
}

// Prune is the JSON form of what a prune did (or would do, dry_run).
type Prune struct {
	Thread   string    `json:"thread"`
	DryRun   bool      `json:"dry_run"`
	Kept     int       `json:"kept"`
	Pruned   []string  `json:"pruned"`   // checkpoint ids
	Erasures []Receipt `json:"erasures"` // the erasure records; [] on a dry run
	Corrupt  int       `json:"corrupt"`
}

// Fork is the JSON form of what a fork did.
type Fork struct {
	Checkpoint Checkpoint    `json:"checkpoint"` // the first checkpoint of the new thread
	From       CheckpointRef `json:"from"`
	Note       *Receipt      `json:"note"` // the fork record on the source thread; null if it failed
}
