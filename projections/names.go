package projections

import "github.com/spl-dev/spl/projections/fold"

// The names of package fold that this package's API and callers use. The
// fold lives in package fold, which imports only records; these aliases
// keep projections.Thread and the rest working for callers of the runtime
// and the Reader.

type (
	// Fold is a projection's logic: fold.Fold.
	Fold = fold.Fold
	// Key names one value of a read model: fold.Key.
	Key = fold.Key
	// Value is one value of a read model as a fold holds it: fold.Value.
	Value = fold.Value
	// History is the log before an entry: fold.History.
	History = fold.History
	// Stored is a value as a Store holds it: fold.Stored.
	Stored = fold.Stored
	// Write is one change of a commit: fold.Write.
	Write = fold.Write
	// Store holds read models: fold.Store.
	Store = fold.Store
	// Tx is what Fold.Apply reads and changes for one entry: fold.Tx.
	Tx = fold.Tx
	// Thread is the value of a thread in ModelThreads: fold.Thread.
	Thread = fold.Thread
	// Gap is a stretch of a thread's chain the projection never saw:
	// fold.Gap.
	Gap = fold.Gap
	// Checkpoint is the value of a thread in ModelCheckpoints:
	// fold.Checkpoint.
	Checkpoint = fold.Checkpoint
	// Erased is the value of an erased record in ModelErased: fold.Erased.
	Erased = fold.Erased
)

// The built-in projection and its read models: fold.IndexName and
// fold.ModelThreads, fold.ModelCheckpoints, fold.ModelErased.
const (
	// IndexName is the name of the built-in projection, Index.
	IndexName = fold.IndexName
	// ModelThreads holds a [Thread] per thread, keyed by [ThreadKey].
	ModelThreads = fold.ModelThreads
	// ModelCheckpoints holds the latest [Checkpoint] of each thread that
	// has one, keyed by [ThreadKey].
	ModelCheckpoints = fold.ModelCheckpoints
	// ModelErased holds an [Erased] per erased record, keyed by the
	// record's id (text form).
	ModelErased = fold.ModelErased
)

// Index is the built-in projection: fold.Index.
func Index() Fold { return fold.Index() }

// ThreadKey is the key of thread in ModelThreads and ModelCheckpoints:
// fold.ThreadKey.
func ThreadKey(thread string) string { return fold.ThreadKey(thread) }
