package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaseValue is the value of "lease.<name>" in the meta bucket.
type leaseValue struct {
	Holder  string `json:"holder"`            // the process that runs the projection
	TTL     int64  `json:"ttl_ms"`            // it renews the lease well within this
	Renewed int64  `json:"renewed"`           // Unix ms of the last renewal, by the holder's clock
	Handoff string `json:"handoff,omitempty"` // a process that asks for the lease
}

// lease is one projection's lease as seen by one runtime: at most one
// process applies a projection at a time. The holder renews it every TTL/3
// by a compare-and-set on its revision; another process takes it over when
// its revision has not moved for a TTL by its own clock, or at once when
// the holder's last renewal is older than a TTL by the wall clock (a hint
// that lets a short-lived command take over a dead holder at once). Safety
// does not rest on the lease: every write of a projector expects the
// revision it read, so a projector that lost its lease without knowing
// fails its next write.
type lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration
	now    func() time.Time // the runtime's clock (Options.Now)

	mu      sync.Mutex // guards the fields below: a renewer runs beside the projector
	rev     uint64     // revision of the lease while held
	renewed time.Time  // when it was last renewed while held, by now
	handoff string     // who asked for the lease while held

	seenRev uint64    // another holder's lease revision, and
	seenAt  time.Time // when this process first saw it
}

func (l *lease) value(handoff string) []byte {
	b, _ := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl.Milliseconds(), Renewed: l.now().UnixMilli(), Handoff: handoff})
	return b
}

// read returns the current lease value and revision (0: none).
func (l *lease) read(ctx context.Context) (leaseValue, uint64, error) {
	e, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return leaseValue{}, 0, nil
	}
	if err != nil {
		return leaseValue{}, 0, fmt.Errorf("read lease: %w", err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return leaseValue{}, e.Revision(), nil // unreadable: treat as expired
	}
	return v, e.Revision(), nil
}

// live reports whether v (at rev) is held by a live process, by the wall
// clock hint and by what this process saw of its revision.
func (l *lease) live(v leaseValue, rev uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev == 0 || v.Holder == "" {
		return false
	}
	ttl := time.Duration(v.TTL) * time.Millisecond
	if ttl <= 0 {
		ttl = l.ttl
	}
	if l.now().Sub(time.UnixMilli(v.Renewed)) > ttl {
		return false
	}
	if rev != l.seenRev {
		l.seenRev, l.seenAt = rev, l.now()
		return true
	}
	return l.now().Sub(l.seenAt) <= ttl
}

// acquire takes the lease if it is free, expired or handed to this
// process. It reports whether this process holds it, and who does.
func (l *lease) acquire(ctx context.Context) (bool, leaseValue, error) {
	v, rev, err := l.read(ctx)
	if err != nil {
		return false, v, err
	}
	switch {
	case rev == 0:
		rev, err = l.kv.Create(ctx, l.key, l.value(""))
	case v.Holder == l.holder || !l.live(v, rev):
		rev, err = l.kv.Update(ctx, l.key, l.value(""), rev)
	default:
		return false, v, nil
	}
	if err != nil {
		if isConflict(err) {
			return false, v, nil
		}
		return false, v, fmt.Errorf("acquire lease: %w", err)
	}
	l.mu.Lock()
	l.rev, l.renewed, l.handoff = rev, l.now(), ""
	l.mu.Unlock()
	return true, leaseValue{Holder: l.holder}, nil
}

// errLost reports a lease taken over by another process.
var errLost = errors.New("lease lost")

// renew renews the held lease. It returns errLost when another process
// holds it now.
func (l *lease) renew(ctx context.Context) error {
	for range 3 {
		l.mu.Lock()
		held, handoff := l.rev, l.handoff
		l.mu.Unlock()
		if held == 0 {
			return errLost
		}
		rev, err := l.kv.Update(ctx, l.key, l.value(handoff), held)
		if err == nil {
			l.mu.Lock()
			l.rev, l.renewed = rev, l.now()
			l.mu.Unlock()
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("renew lease: %w", err)
		}
		v, rev, err := l.read(ctx)
		if err != nil {
			return err
		}
		if rev == 0 || v.Holder != l.holder {
			l.mu.Lock()
			l.rev = 0
			l.mu.Unlock()
			return errLost
		}
		// Still ours: another process asked for it.
		l.mu.Lock()
		l.rev, l.handoff = rev, v.Handoff
		l.mu.Unlock()
	}
	return fmt.Errorf("renew lease: %w", ErrConflict)
}

// check reads the held lease without writing it: it learns of a process
// that asked for it, and returns errLost when another process holds it.
func (l *lease) check(ctx context.Context) error {
	v, rev, err := l.read(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 || rev == 0 || v.Holder != l.holder {
		l.rev = 0
		return errLost
	}
	l.rev = rev
	if v.Handoff != "" {
		l.handoff = v.Handoff
	}
	return nil
}

// asked returns the process that asked for the held lease, "" if none.
func (l *lease) asked() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handoff
}

// valid reports whether the holder may still write: its last renewal is
// recent enough that no other process can have taken the lease over.
func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && l.now().Sub(l.renewed) < l.ttl*2/3
}

// grant hands the held lease to the process that asked for it.
func (l *lease) grant(ctx context.Context) error {
	l.mu.Lock()
	rev, to := l.rev, l.handoff
	l.rev, l.handoff = 0, ""
	l.mu.Unlock()
	b, _ := json.Marshal(leaseValue{Holder: to, TTL: l.ttl.Milliseconds(), Renewed: l.now().UnixMilli()})
	for range 3 {
		_, err := l.kv.Update(ctx, l.key, b, rev)
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("hand over lease: %w", err)
		}
		// Written since this process last looked (a renewal, another ask):
		// hand it over if it is still ours.
		v, cur, err := l.read(ctx)
		if err != nil || cur == 0 || v.Holder != l.holder {
			return err
		}
		rev = cur
	}
	return nil
}

// release gives up the held lease, so that a standby takes over at once.
func (l *lease) release(ctx context.Context) {
	l.mu.Lock()
	rev := l.rev
	l.rev, l.handoff = 0, ""
	l.mu.Unlock()
	if rev != 0 {
		_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
	}
}

// ask asks the live holder to hand the lease over to this process.
func (l *lease) ask(ctx context.Context) error {
	v, rev, err := l.read(ctx)
	if err != nil || rev == 0 || v.Handoff == l.holder {
		return err
	}
	v.Handoff = l.holder
	b, _ := json.Marshal(v)
	if _, err := l.kv.Update(ctx, l.key, b, rev); err != nil && !isConflict(err) {
		return fmt.Errorf("ask for lease: %w", err)
	}
	return nil
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}
