package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// ErrNotErasable reports an erasure the log refuses: an erasure record
// (erasures are the audit trail and stay), or a record on another thread.
var ErrNotErasable = errors.New("spl/log: cannot erase")

// Meta bucket: small state of the log itself, replicated with the stream.
const (
	metaBucket      = "spl_meta"
	keyErasureApply = "erasure.applied"
)

// EraseResult says what an erasure did.
type EraseResult struct {
	// Erasure is the core.erasure record appended; zero Clock when every
	// id was already erased and nothing was appended.
	Erasure Entry
	// Erased are the ids erased by this call.
	Erased []records.ID
	// Already are the ids that an earlier erasure had erased (a no-op).
	Already []records.ID
	// ErasedClocks and AlreadyClocks are the same of EraseMessages: the
	// clocks of messages that are no records.
	ErasedClocks, AlreadyClocks []uint64
}

// Erase erases records of thread: it appends one core.erasure record (act
// FORGET) that names them with their headers and clocks and carries
// reason, then deletes their messages securely (the server overwrites the
// bytes on disk). Reads never return an erased record; the chain stays
// verifiable through the headers in the erasure record.
//
// It refuses, changing nothing, an id that is no record (ErrNotFound), an
// erasure record or a record of another thread (ErrNotErasable). An id
// that an earlier erasure erased is reported in Already and otherwise
// ignored. If the process dies after the append and before the deletes,
// the next Open (or Erase) of the log finishes them. With EraseAfter, the
// erasure is appended only if the thread has not moved (see AppendAfter).
func (l *Log) Erase(ctx context.Context, thread string, ids []records.ID, reason, actor string, opts ...EraseOption) (EraseResult, error) {
	var o eraseOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(ids) == 0 {
		return EraseResult{}, &records.FieldError{Field: "ids", Rule: "must name at least one record"}
	}
	targets, already, err := l.eraseTargets(ctx, thread, ids)
	if err != nil {
		return EraseResult{}, err
	}
	res := EraseResult{Already: already}
	if len(targets) == 0 {
		// Nothing new to erase; an earlier erasure's deletes may still be
		// pending (an interrupted delete phase): finish them now.
		if err := l.finishErasures(ctx, o.stop); err != nil {
			return res, fmt.Errorf("finish pending erasures: %w", err)
		}
		return res, nil
	}
	r, err := l.eraseNew(ctx, thread, actor, reason, targets, o, res)
	if l.door != nil {
		r.Already = append(already, r.Already...)
	}
	return r, err
}

// eraseNew builds and seals the erasure record of targets on thread, and
// appends it and deletes them: through the door for a door log (the
// server plans the targets again and erases exactly these, or nothing:
// EraseRecord), else here (res so far).
func (l *Log) eraseNew(ctx context.Context, thread, actor, reason string, targets []records.ErasureTarget, o eraseOptions, res EraseResult) (EraseResult, error) {
	rec, err := records.New(records.ActForget, records.KindErasure, thread, actor, l.now(), &records.Erasure{Targets: targets, Reason: reason})
	if err != nil {
		return EraseResult{}, err
	}
	if o.seal != nil {
		if rec, err = o.seal(rec); err != nil {
			return EraseResult{}, err
		}
	}
	if l.door != nil {
		return l.door.erase(ctx, rec, o)
	}
	return l.appendErasure(ctx, rec, targets, o, res)
}

// EraseRecord is Erase of an erasure record built and sealed elsewhere:
// the door's (spl serve) for an erasure a door log sends. rec must be an
// unchained core.erasure record whose targets are, as it names them,
// records of its thread that no erasure has erased yet; else nothing is
// appended and the error says why (ErrMoved when the thread changed since
// the erasure was planned: plan it again). seal, when set, readies rec
// for the log as EraseSealed does; EraseAfter holds as for Erase.
func (l *Log) EraseRecord(ctx context.Context, rec *records.Record, opts ...EraseOption) (EraseResult, error) {
	var o eraseOptions
	for _, opt := range opts {
		opt(&o)
	}
	h := rec.Header
	if h.Kind != records.KindErasure || h.Act != records.ActForget {
		return EraseResult{}, &records.FieldError{Field: "kind", Rule: fmt.Sprintf("an erasure is a %s record of act %s, not %s %s", records.KindErasure, records.ActForget, h.Act, h.Kind)}
	}
	if err := rec.Validate(); err != nil {
		return EraseResult{}, err
	}
	er, err := records.DecodeErasure(rec.Body)
	if err != nil {
		return EraseResult{}, err
	}
	// What the erasure names, as the log finds it now: its record
	// targets, then its message targets.
	var ids []records.ID
	var mclocks []uint64
	var named, namedMsgs []records.ErasureTarget
	for _, t := range er.Targets {
		if t.Message() {
			mclocks, namedMsgs = append(mclocks, t.Clock), append(namedMsgs, t)
		} else {
			ids, named = append(ids, t.ID), append(named, t)
		}
	}
	named = append(named, namedMsgs...)
	if len(named) == 0 {
		return EraseResult{}, &records.FieldError{Field: "body.targets", Rule: "must name at least one record"}
	}
	var targets []records.ErasureTarget
	var already []records.ID
	var erasedSince []uint64
	if len(ids) > 0 {
		if targets, already, err = l.eraseTargets(ctx, h.Thread, ids); err != nil {
			return EraseResult{}, err
		}
	}
	if len(mclocks) > 0 {
		var ms []records.ErasureTarget
		if ms, erasedSince, err = l.messageTargets(ctx, h.Thread, mclocks); err != nil {
			return EraseResult{}, err
		}
		targets = append(targets, ms...)
	}
	if len(already) > 0 || len(erasedSince) > 0 || !slices.Equal(targets, named) {
		return EraseResult{}, fmt.Errorf("%w: the records erasure %s names on thread %q are no longer as it says (erased or changed since it was planned): plan it again", ErrMoved, rec.ID(), h.Thread)
	}
	if o.seal != nil {
		if rec, err = o.seal(rec); err != nil {
			return EraseResult{}, err
		}
	}
	return l.appendErasure(ctx, rec, targets, o, EraseResult{})
}

// appendErasure appends the erasure record rec of targets, then deletes
// them.
func (l *Log) appendErasure(ctx context.Context, rec *records.Record, targets []records.ErasureTarget, o eraseOptions, res EraseResult) (EraseResult, error) {
	var err error
	if o.cond {
		res.Erasure, err = l.AppendAfter(ctx, rec, o.after)
	} else {
		res.Erasure, err = l.Append(ctx, rec)
	}
	if err != nil {
		return EraseResult{}, fmt.Errorf("append erasure: %w", err)
	}
	if err := o.stop.at(stepAppended); err != nil {
		return res, err
	}
	if err := l.finishErasures(ctx, o.stop); err != nil {
		return res, fmt.Errorf("erasure %s appended; deleting its records: %w (the next open retries)", res.Erasure.ID, err)
	}
	for _, t := range targets {
		if !t.Message() {
			res.Erased = append(res.Erased, t.ID)
		}
	}
	return res, nil
}

// EraseOption changes how Erase appends its erasure record.
type EraseOption func(*eraseOptions)

type eraseOptions struct {
	cond  bool
	after uint64
	stop  stopper // tests only: stops Erase at a step, as a crash would
	seal  func(*records.Record) (*records.Record, error)
}

// stopper, when set, is asked at every step of an erasure; an error stops
// the erasure there, as a crash would. Tests set it (stopAt); it is nil
// otherwise.
type stopper func(step string) error

// Steps of an erasure at which a stopper is asked.
const (
	stepAppended = "appended"  // the erasure record is in the log
	stepIntent   = "intent"    // the deletes of one erasure record are announced
	stepDeleted  = "deleted"   // one target is deleted
	stepSynced   = "synced"    // the rewritten blocks are durable
	stepMarked   = "watermark" // the watermark is stored
)

func (s stopper) at(step string) error {
	if s == nil {
		return nil
	}
	return s(step)
}

// stopAt makes Erase ask s at every step (see stopper). Unexported: fault
// injection for the package's tests.
func stopAt(s stopper) EraseOption {
	return func(o *eraseOptions) { o.stop = s }
}

// EraseAfter makes Erase append its erasure record only if the thread's
// last record is still the one at clock after, as AppendAfter does: for an
// erasure decided from what the caller read of the thread (retention), so
// that a record appended since, a pin say, is never overridden unseen.
// When the thread has moved, Erase erases nothing and returns an error
// wrapping ErrMoved.
func EraseAfter(after uint64) EraseOption {
	return func(o *eraseOptions) { o.cond, o.after = true, after }
}

// eraseTargets resolves ids on thread: the targets to erase, and the ids
// that are already erased.
func (l *Log) eraseTargets(ctx context.Context, thread string, ids []records.ID) ([]records.ErasureTarget, []records.ID, error) {
	want := make(map[string]records.ID, len(ids))
	for _, id := range ids {
		want[id.String()] = id
	}
	found := make(map[records.ID]Entry)
	erased := make(map[records.ID]bool)
	var decodeErr error
	err := l.scan(ctx, ThreadSubject(thread), 1, 0, 1024, func(m stored) bool {
		isErasure := isErasureSubject(m.subject)
		id, named := want[m.hdr.Get(HeaderID)]
		if !isErasure && !named {
			return true
		}
		e, err := l.decode(m)
		if err != nil {
			if named {
				decodeErr = err
				return false
			}
			return true // a corrupt erasure record erases nothing
		}
		if named {
			found[id] = e
		}
		if isErasure {
			if er, err := records.DecodeErasure(e.Record.Body); err == nil {
				for _, t := range er.Targets {
					erased[t.ID] = true
				}
			}
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("erase: read thread: %w", err)
	}
	var targets []records.ErasureTarget
	var already []records.ID
	seen := make(map[records.ID]bool)
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		e, ok := found[id]
		switch {
		case erased[id]:
			already = append(already, id)
		case ok && e.Record.Header.Kind == records.KindErasure:
			return nil, nil, fmt.Errorf("%w: %s is an erasure record; erasures stay as the audit trail", ErrNotErasable, id)
		case ok:
			targets = append(targets, records.ErasureTarget{ID: id, Header: e.Record.Header, Clock: e.Clock})
		default:
			if other, err := l.Get(ctx, id, ""); err == nil {
				return nil, nil, fmt.Errorf("%w: %s is on thread %q, not %q", ErrNotErasable, id, other.Record.Header.Thread, thread)
			}
			return nil, nil, fmt.Errorf("erase: record %s on thread %q: %w", id, thread, ErrNotFound)
		}
	}
	return targets, already, nil
}

// finishErasures deletes the records named by every erasure record past the
// applied watermark whose messages are still there, then moves the
// watermark. Every step is idempotent: two processes may run it at once.
func (l *Log) finishErasures(ctx context.Context, stop stopper) error {
	kv, err := l.meta(ctx, false)
	if err != nil {
		return err
	}
	var applied uint64
	if kv != nil {
		if e, err := kv.Get(ctx, keyErasureApply); err == nil {
			applied, _ = strconv.ParseUint(string(e.Value()), 10, 64)
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("read erasure watermark: %w", err)
		}
	}
	stream, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	var last uint64
	var ferr error
	// Each erasure's deletes are announced on disk first, and the intents
	// dropped only once the deletes are durable: a server killed in the
	// middle of a secure delete is scrubbed before it serves again
	// (natsio.Conn.BeginErase).
	var intents []*natsio.EraseIntent
	defer func() {
		for _, i := range intents {
			i.Close()
		}
	}()
	err = l.scan(ctx, SubjectPrefix+".*."+records.KindErasure, applied+1, 0, 256, func(m stored) bool {
		e, err := l.decode(m)
		if err == nil {
			var er *records.Erasure
			if er, err = records.DecodeErasure(e.Record.Body); err == nil {
				var intent *natsio.EraseIntent
				if intent, err = l.c.BeginErase(l.opts.Stream, clocks(er.Targets)); err == nil {
					intents = append(intents, intent)
					if err = stop.at(stepIntent); err == nil {
						err = l.deleteTargets(ctx, stream, er.Targets, stop, &intents)
					}
				}
			}
		}
		if err != nil && !errors.Is(err, records.ErrCorrupt) {
			ferr = err
			return false
		}
		last = m.clock
		return true
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if last > applied {
		// The secure deletes rewrote blocks; make them durable before the
		// watermark says they are done (the embedded log's server does not
		// fsync by itself).
		if l.blocks != nil {
			if err := l.blocks.SyncAll(); err != nil {
				return err
			}
		}
		if err := l.bodies.sync(); err != nil {
			return err
		}
		if err := stop.at(stepSynced); err != nil {
			return err
		}
		if kv, err = l.meta(ctx, true); err != nil {
			return err
		}
		if _, err := kv.Put(ctx, keyErasureApply, []byte(strconv.FormatUint(last, 10))); err != nil {
			return fmt.Errorf("store erasure watermark: %w", err)
		}
		if err := stop.at(stepMarked); err != nil {
			return err
		}
	}
	for _, i := range intents {
		if err := i.Done(); err != nil {
			return err
		}
	}
	return nil
}

// clocks are the clocks of targets that a delete would look up.
func clocks(targets []records.ErasureTarget) []uint64 {
	var cs []uint64
	for _, t := range targets {
		if t.Clock != 0 && t.Header.Kind != records.KindErasure {
			cs = append(cs, t.Clock)
		}
	}
	return cs
}

// deleteTargets securely deletes each target's message, when the message
// at its clock is still the target and is not an erasure record (which
// records.Validate refuses to name, but a record stored before that rule
// may name: erasures stay as the audit trail whatever names them). The
// body of a record kept outside goes first, its intent added to intents;
// so does whatever is left of one whose message is gone already (a
// process that died between the two).
func (l *Log) deleteTargets(ctx context.Context, stream jetstream.Stream, targets []records.ErasureTarget, stop stopper, intents *[]*natsio.EraseIntent) error {
	eraseBody := func(t records.ErasureTarget) error {
		intent, err := l.bodies.erase(ctx, t.Header.BD)
		if intent != nil {
			*intents = append(*intents, intent)
		}
		return err
	}
	for _, t := range targets {
		if t.Clock == 0 || t.Header.Kind == records.KindErasure {
			continue // written without a clock (nothing to find cheaply), or an erasure
		}
		m, err := l.get(ctx, getRequest{Seq: t.Clock})
		if errors.Is(err, ErrNotFound) {
			if !t.Message() {
				if err := eraseBody(t); err != nil {
					return err
				}
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read %d: %w", t.Clock, err)
		}
		if isErasureSubject(m.subject) {
			continue // an erasure: never deleted
		}
		if t.Message() && records.MessageDigest(m.data) != t.Digest || !t.Message() && m.hdr.Get(HeaderID) != t.ID.String() {
			continue // not the target
		}
		if !t.Message() && records.Packed(m.data) && keptOutside(m.data) {
			if err := eraseBody(t); err != nil {
				return err
			}
		}
		if err := l.secureDelete(ctx, stream, t.Clock); err != nil {
			return fmt.Errorf("secure delete %d: %w", t.Clock, err)
		}
		if err := stop.at(stepDeleted); err != nil {
			return err
		}
	}
	return nil
}

// keptOutside reports whether data, a packed envelope
// (records.Packed), keeps its body beside the log (a damaged one is taken to:
// its parts, if any, go with it).
func keptOutside(data []byte) bool {
	_, st, err := records.UnmarshalStored(data)
	return err != nil || st.Outside
}

// secureDelete securely deletes the message at clock, each try bounded
// by the log's timeout and tried again when it got no answer: a request
// made while a server that took over the store is still recovering it
// can go unanswered (seen under -race: one waited out a three-minute
// open), and deleting a message twice is no error (it is gone).
func (l *Log) secureDelete(ctx context.Context, stream jetstream.Stream, clock uint64) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		err := stream.SecureDeleteMsg(tctx, clock)
		cancel()
		switch {
		case err == nil, isNoMessage(err):
			return nil
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			continue
		}
		return err
	}
}

func isNoMessage(err error) bool {
	return errors.Is(err, jetstream.ErrMsgNotFound) || strings.Contains(err.Error(), "no message found")
}

// meta returns the log's meta bucket, creating it when create is set
// (else a missing bucket is nil).
func (l *Log) meta(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	if l.metaKV != nil {
		return l.metaKV, nil
	}
	kv, err := l.c.JS.KeyValue(ctx, metaBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && !create {
		return nil, nil
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.c.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      metaBucket,
			Description: "spl: state of the log itself",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    l.opts.Replicas,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("meta bucket: %w", err)
	}
	l.metaKV = kv
	return kv, nil
}

func (l *Log) now() time.Time {
	if l.opts.Now != nil {
		return l.opts.Now()
	}
	return time.Now()
}

// CheckErase refuses, reading thread once and writing nothing, what Erase
// of ids on thread would refuse: an erasure record (erasures stay as the
// audit trail, ErrNotErasable), a record of another thread
// (ErrNotErasable), an id that is nowhere (ErrNotFound). A caller that
// erases a large set in several erasure records checks the whole set
// first, so that a refusal erases nothing.
func (l *Log) CheckErase(ctx context.Context, thread string, ids []records.ID) error {
	_, _, err := l.eraseTargets(ctx, thread, ids)
	return err
}
