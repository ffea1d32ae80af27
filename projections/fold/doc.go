// Package fold is the pure half of spl's projections: a projection's
// logic as a fold of log entries into read models (Fold), the transaction
// it applies an entry through (Tx), the read models as a runtime holds
// them between stores (State), and the built-in thread index (Index). It
// does no I/O and reads no clock: the read models come from a Store and
// the log before an entry from a History, both given by the caller, and
// the time of a record is its header's ts. It imports only the standard
// library and package records.
//
// Package projections is the edge: it runs a Fold against the log's
// JetStream stream and stores the read models in KV buckets. Here the same
// folds run in memory (MemoryStore, MemoryLog, FoldMemory), which is how
// the scripts in testdata/ test them, records in and read models out,
// without a server:
//
//	st, err := fold.FoldMemory(ctx, fold.Index(), hist, entries, 100)
//	vals := st.Dump() // model and key → the value's JSON
//
// Every value carries as_of, the clock of the last entry that changed it,
// and a fold leaves a value alone for an entry at or below it, so that
// entries applied again after a crash change nothing.
//
// # Erasure
//
// A core.erasure record (act FORGET) removes its targets from every model:
//
//   - each target is listed in the erased model, the first erasure that
//     names it winning; a target named again, or never in the log, changes
//     nothing else (a target never in the log is still listed: the erased
//     model is what explains the missing record to a reader);
//   - the thread's counts go down by the targets it counted; when the first
//     record goes, the first becomes the oldest record after it that is not
//     erased; when the last goes (an erasure on another thread), the last
//     becomes the newest before it; a thread left with no record is removed;
//   - when the latest checkpoint goes, the newest earlier checkpoint not
//     erased takes its place (or the thread has none).
//
// The log deletes erased records right after it appends the erasure, so a
// projector that lags behind, and every rebuild, may never see a target.
// The fold gives the same models either way: a record whose prev is not the
// last record the fold saw on its thread (looking through records already
// erased) opens a gap in the thread's value, and a target is taken off the
// counts only if it is at or before the thread's last record and outside
// every gap. A gap closes when the chain through it is all erased records.
// An erasure rewrites the values of every thread it names as of its clock,
// counted or not. The fallbacks (the first, the last, the previous
// checkpoint) read the log before the erasure through the Tx, which asks
// the History the runtime gives it; the targets carry their clocks, so no
// scan is needed (a target without its clock, which spl's log never
// writes, is looked for on its thread and kind).
package fold
