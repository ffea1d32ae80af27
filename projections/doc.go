// Package projections folds the log into read models that any process can
// read: the thread index, the latest checkpoint of each thread, the erased
// records. A projection is a pure fold (package fold: an entry in, changes
// to the read models out, no I/O, no clock) and a runtime at the edge
// (Runtime, here) that consumes the log from a stored position, folds, and
// stores models and position in JetStream KV buckets, replicated with the
// stream. The names of package fold that callers of this package use
// (Fold, Thread, Checkpoint, Index, …) are aliased here.
//
//	r, err := projections.New(ctx, l, projections.Index(), projections.Options{})
//	go r.Run(ctx)                        // apply while holding the lease; stand by otherwise
//	err = r.Wait(ctx, receipt.Clock)     // read-your-writes; catches up itself when nobody runs it
//	ts, err := projections.NewReader(l).Threads(ctx, projections.ThreadFilter{Limit: 50})
//
// # Read models of Index
//
// Three KV buckets (history 1), one value per key, each value the
// encoding/json encoding of a Go struct, as named here (keys in field
// order, maps sorted; encode.go appends them itself, byte for byte the
// same):
//
//	bucket                key                  value
//	spl_proj_threads      ThreadKey(thread)    Thread: record and checkpoint counts, first and last
//	                                           record (clock, id), last actor, last activity (ts),
//	                                           records per kind and per actor, gaps, as_of
//	spl_proj_checkpoints  ThreadKey(thread)    Checkpoint: the thread's latest checkpoint not
//	                                           erased: id, clock, ts, actor, as_of
//	spl_proj_erased       id (text form)       Erased: the record's clock, thread, kind, prev, and
//	                                           the erasure that removed it: id, clock, reason, ts
//	spl_proj_meta         pos.<name>           the projection's position, counters, rebuild state
//	                      lease.<name>         who applies the projection (holder, TTL, renewal)
//
// No value holds record body content. A KV update leaves the bytes of the
// old revision in the bucket's files, so a body kept in a read model would
// survive the erasure of its record; the body fields of a checkpoint
// (summary, name, session id) are read from the log by Reader instead, one
// direct get per checkpoint returned. Record headers are kept, as erasure
// records keep them.
//
// A log on another stream than log.DefaultStream has buckets named
// spl_proj_<stream>_<model> (BucketName). ThreadKey is the thread's subject
// token (records.ThreadToken), with a leading "=" for the "~" of a thread that
// is not a plain token: KV keys allow [-/_=.a-zA-Z0-9] only.
//
// # Idempotence
//
// Every value carries as_of, the clock of the last entry that changed it,
// and the fold leaves a value alone for an entry at or below it. The
// runtime stores values before the position they reach, so a crash
// between the two makes the next projector apply their entries again, to
// the same result. Values are written with the expected revision of the key
// (compare-and-set) and the position likewise, so a projector that lost its
// lease without knowing cannot overwrite newer work: its write fails, and
// it starts again from the stored position.
//
// # Erasure
//
// A core.erasure record (act FORGET) removes its targets from every model;
// the rules, and how the fold gives the same models whether or not it saw
// the targets before the log deleted them, are in package fold's doc. The
// fallbacks an erasure needs (the first, the last, the previous
// checkpoint) read the log before the erasure at the edge, through
// History: one last-by-subject get per step, or a page of the thread.
//
// Retention policy records (core.retention) are records like any other;
// retention itself appends erasures.
//
// # The runtime
//
// A Runtime runs one projection while it holds the projection's lease
// (lease.<name>, TTL Options.LeaseTTL, renewed every TTL/3 by
// compare-and-set). Another runtime, in this process or another, stands
// by and takes over when the lease is given back, or when its revision has
// not moved for a TTL (or the holder's renewal time is a TTL old by the
// wall clock). A process that needs the lease for a rebuild asks for it in
// the lease value; the holder hands it over at its next batch.
//
// The holder consumes the log with an ordered consumer from the stored
// position. Messages waiting are gathered into a batch (Options.MaxBatch,
// 32 MiB), verified with log.Log.DecodeMessage on every core while the previous
// batch is stored, folded, and stored: the changed values of each model
// (in the order of the clocks that changed them), then the position. While
// the consumer has more messages pending (a rebuild, a projector behind),
// the changes of several batches are stored together, up to 50,000 values
// or a second (Options.MaxHeld, Options.MaxHold), so that a value changed
// by many batches is written once. With
// a server that fsyncs, values go out as atomic batches of at most 1,000
// messages, one fsync each; on the embedded server, which fsyncs no KV
// stream, as plain publishes sent all at once, each landing on its own
// (a crash between them is a crash between stores: the entries since the
// stored position are applied again). A message that does
// not verify (records.ErrCorrupt) is skipped and counted in the position;
// it never stops the projector. Values stay cached between stores
// (Options.CacheSize), so a hot thread is not read back.
//
// Wait waits for a clock: it watches the position, and when no process
// holds the lease it catches the projection up itself (CatchUp). Rebuild
// stores a position that asks for the models to be emptied and the log
// applied again from clock 1, up to the log's clock at that time; whoever
// applies the projection next (the rebuild itself, or a standby if the
// rebuild is interrupted) carries it on from the stored position, so a
// rebuild resumes rather than restarts.
//
// # Reading
//
// A Reader reads the models of Index without a runtime. The threads bucket
// keeps one message per thread, in the order of their last change, so
// Threads reads its stream backwards from the end, in pages of direct gets,
// and stops as soon as no thread further back can come before those found:
// newest activity first without a scan of the log or of the index. The
// filters (actor, kind, since) apply on the way; since also ends the walk
// at the first value stored well before it. Checkpoints pages the latest
// checkpoints the same way. Values stored while a walk runs are read
// forward from where it began and merged by key, newest first. A negative
// offset or limit is a *records.FieldError.
//
// # Errors
//
// A wait that times out is a *BehindError (wrapping ErrBehind and the
// context's error) that says where the projection is and who runs it.
// ErrConflict marks a write that lost a compare-and-set, ErrBusy a lease
// another process holds and did not hand over.
package projections
