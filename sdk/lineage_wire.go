package sdk

import (
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// Wire returns the JSON form of sc, as spl session show --json prints it
// and GET /v1/threads/{thread}/checkpoint answers it.
func (sc SavedCheckpoint) Wire() (wire.Checkpoint, error) {
	return wire.NewCheckpoint(sc.ID, sc.Clock, sc.Record.Record, sc.Checkpoint)
}

// Listing returns the form of sc in a thread's checkpoint list: the
// checkpoint and its Facts.
func (sc SavedCheckpoint) Listing() (wire.CheckpointListing, error) {
	j, err := sc.Wire()
	if err != nil {
		return wire.CheckpointListing{}, err
	}
	f := FactsOf(sc.Checkpoint)
	return wire.CheckpointListing{Checkpoint: j, Step: f.Step, Progress: f.Progress, IsClean: f.Clean}, nil
}

// Ref returns where sc is.
func (sc SavedCheckpoint) Ref() wire.CheckpointRef {
	return wire.CheckpointRef{Thread: sc.Header.Thread, ID: sc.ID.String(), Clock: sc.Clock}
}

func wireReceipt(r Receipt) wire.Receipt { return wire.Receipt{ID: r.ID.String(), Clock: r.Clock} }

// Wire returns the JSON form of l.
func (l Lineage) Wire() wire.Lineage {
	out := wire.Lineage{Thread: l.Thread, ForkedFrom: wire.NewForkLink(l.ForkedFrom),
		Nodes: make([]wire.LineageNode, 0, len(l.Nodes)), Corrupt: l.Corrupt}
	if out.Corrupt == nil {
		out.Corrupt = []uint64{}
	}
	for _, n := range l.Nodes {
		j := wire.LineageNode{Type: n.Type, ID: n.ID.String(), Clock: n.Clock, Time: wire.FormatTime(n.Time),
			TS: n.Time.UnixMilli(), Actor: n.Actor, Parent: wire.OptionalID(n.Parent), ImpliedParent: n.ImpliedParent,
			ToThread: n.ToThread, ToID: wire.OptionalID(n.ToID), ErasedBy: wire.OptionalID(n.ErasedBy), Reason: n.Reason}
		if cp := n.Checkpoint; cp != nil {
			j.Name, j.Summary, j.ForkedFrom = cp.Name, cp.Summary, wire.NewForkLink(cp.ForkedFrom)
		}
		out.Nodes = append(out.Nodes, j)
	}
	return out
}

// Wire returns the JSON form of d.
func (d Diff) Wire() wire.Diff {
	out := wire.Diff{A: d.A.Ref(), B: d.B.Ref(), Changes: make([]wire.DiffChange, 0, len(d.Changes))}
	for _, c := range d.Changes {
		out.Changes = append(out.Changes, wire.DiffChange{Op: c.Op, Path: c.Path, Old: c.Old, New: c.New})
	}
	return out
}

// Wire returns the JSON form of r.
func (r PruneResult) Wire() wire.Prune {
	out := wire.Prune{Thread: r.Thread, DryRun: r.DryRun, Kept: r.Kept, Corrupt: r.Corrupt,
		Pruned: idStrings(r.Pruned), Erasures: make([]wire.Receipt, 0, len(r.Erasures))}
	for _, e := range r.Erasures {
		out.Erasures = append(out.Erasures, wireReceipt(e))
	}
	return out
}

// Wire returns the JSON form of f.
func (f Forked) Wire() (wire.Fork, error) {
	j, err := f.Checkpoint.Wire()
	if err != nil {
		return wire.Fork{}, err
	}
	out := wire.Fork{Checkpoint: j, From: f.From.Ref()}
	if f.Note.Clock != 0 {
		n := wireReceipt(f.Note)
		out.Note = &n
	}
	return out, nil
}

func idStrings(ids []records.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
