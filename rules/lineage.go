package rules

import (
	"sort"

	"github.com/spl-dev/spl/records"
)

// LineageEntry is a record of a thread that bears on the parent of a
// checkpoint saved there: a checkpoint (one an erasure removed since
// too), or a resume record.
type LineageEntry struct {
	Clock uint64
	// ID is the checkpoint's id; for a resume record, the id of the
	// checkpoint it names (zero: its body names none that can be read).
	ID     records.ID
	Resume bool // a resume record (records.KindSessionResumed)
	// ErasedAt is, for a checkpoint an erasure removed, the clock of the
	// erasure record (0: not erased).
	ErasedAt uint64
}

// Parent returns the parent of a checkpoint saved at clock at, on a
// thread whose lineage entries (records that verify; in clock order)
// are entries, when its body names none: the checkpoint that the newest
// resume record before it names, when that record is newer than every
// checkpoint before it, else the newest checkpoint before it; zero on a
// thread that held neither. It decides from the thread as it stood when
// the checkpoint was saved: a checkpoint an erasure removed before at
// was not there to descend from, one removed after still is. A resume
// record that names no checkpoint decides nothing (the newest
// checkpoint does), and an older resume record never does. at 0 is
// after every entry: the parent of the checkpoint about to be saved.
//
// The service layer asks it on both sides: on save, with the thread's
// newest checkpoint and resume record (sdk's branchHead), and on read,
// for the checkpoints whose body names no parent (sdk's Lineage).
func Parent(entries []LineageEntry, at uint64) records.ID {
	n := len(entries)
	if at != 0 {
		n = sort.Search(len(entries), func(i int) bool { return entries[i].Clock >= at })
	}
	resumeSeen := false
	for i := n - 1; i >= 0; i-- {
		e := entries[i]
		switch {
		case e.Resume:
			if !resumeSeen && !e.ID.IsZero() {
				return e.ID
			}
			resumeSeen = true
		case e.ErasedAt != 0 && (at == 0 || e.ErasedAt < at):
			// gone before the checkpoint was saved
		default:
			return e.ID
		}
	}
	return records.ID{}
}
