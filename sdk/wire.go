package sdk

import (
	"github.com/spl-dev/spl/wire"
)

// Wire returns the JSON form of t, as "spl thread list --json" prints it
// and GET /v1/threads of spl serve answers it.
func (t ThreadInfo) Wire() wire.Thread {
	return wire.Thread{
		Thread: t.Thread, Records: t.Records, Checkpoints: t.Checkpoints,
		FirstClock: t.First, FirstID: wire.OptionalID(t.FirstID),
		LastClock: t.Last, LastID: wire.OptionalID(t.LastID), LastActor: t.LastActor,
		LastTime: wire.FormatTime(t.LastActive), LastTS: t.LastActive.UnixMilli(),
		Kinds: nonNilMap(t.Kinds), Actors: nonNilMap(t.Actors),
	}
}

// nonNilMap makes an absent map print as {} rather than null.
func nonNilMap(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return map[string]uint64{}
	}
	return m
}
