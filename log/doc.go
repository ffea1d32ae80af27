// Package log is spl's append-only record log on NATS JetStream.
//
// One stream (DefaultStream, subjects spl.rec.>) holds every record. A
// record of kind K on thread T is stored under spl.rec.<token(T)>.<K>, so a
// whole thread is spl.rec.<token(T)>.> and the latest record of a kind on
// a thread is one last-by-subject get. A record's clock is its stream
// sequence: a total order over the whole log, assigned by the server.
//
//	l, err := log.Open(ctx, log.Options{Dir: dir}) // embedded, fsync before ack
//	rec, err := records.New(records.ActKnow, "agent.step", "th_1", "did:sync:agent:dev", time.Now(), body)
//	e, err := l.Append(ctx, rec)                  // durable when it returns
//	for e, err := range l.Read(ctx, "th_1") { ... } // clock order, verified
//
// Appends from every goroutine of a process go through one writer that
// gathers what is waiting into one atomic batch (group commit: one fsync
// for the batch). Each record is chained to the previous record of its
// thread (header field prev), and appends to a thread are serialized by
// optimistic concurrency on the thread's wildcard subject, across
// processes too. Reads verify every record's id and body digest; a record
// that does not verify is reported as an error wrapping
// records.ErrCorrupt, never returned as valid.
//
// The package knows records, subjects and the stream; it knows nothing of
// checkpoints or other kinds' meaning. docs/design.md describes the
// protocol choices (envelope, headers, retries, the embedded server).
package log
