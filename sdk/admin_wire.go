package sdk

import (
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// Wire returns the JSON form of what an erasure of thread did.
func (r EraseResult) Wire(thread string) wire.Erase {
	out := wire.Erase{Thread: thread, Erased: idStrings(r.Erased), Already: idStrings(r.Already), Erasures: make([]wire.Receipt, len(r.Erasures)),
		ErasedClocks: r.ErasedClocks, AlreadyClocks: r.AlreadyClocks}
	for i, e := range r.Erasures {
		out.Erasures[i] = wireReceipt(e)
	}
	return out
}

// Wire returns the JSON form of a pin of the checkpoint target.
func (p Pinned) Wire(target records.ID) wire.Pin {
	return wire.Pin{Receipt: wireReceipt(p.Receipt), Thread: p.Thread, Target: target.String(), Already: p.Already}
}

// Wire returns the JSON form of a retention policy.
func (p RetentionPolicy) Wire() wire.RetentionPolicy {
	j := wire.RetentionPolicy{Scope: p.Scope(), Thread: p.Thread, KeepLast: p.KeepLast, MaxAgeMS: p.MaxAge.Milliseconds(),
		Actor: p.Actor, Clock: p.Clock}
	if !p.ID.IsZero() {
		j.ID = p.ID.String()
	}
	if !p.Time.IsZero() {
		j.Time = wire.FormatTime(p.Time)
	}
	return j
}

// Wire returns the JSON form of the latest checkpoint of a thread.
func (c CheckpointInfo) Wire() wire.LatestCheckpoint {
	return wire.LatestCheckpoint{
		Thread: c.Thread, ID: c.ID.String(), Clock: c.Clock,
		Time: wire.FormatTime(c.Time), TS: c.Time.UnixMilli(),
		Actor: c.Actor, Name: c.Name, SessionID: c.SessionID, Summary: c.Summary,
	}
}
