package projections

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A lease reads no clock but the runtime's: a holder that stopped
// renewing loses the lease once its revision has not moved for a TTL by
// the clock of the process that looks, even while the holder's own
// renewal time (by a clock ahead) says it is live; and a holder stops
// writing once its clock says its last renewal is too old.
func TestLeaseExpiresByInjectedClock(t *testing.T) {
	l := openLog(t, "")
	start := time.UnixMilli(1_700_000_000_000)
	ours, theirs := &fakeClock{now: start}, &fakeClock{now: start.Add(10 * time.Hour)}
	r := newRuntime(t, l, Options{Holder: "b", LeaseTTL: time.Hour, Now: ours.Now})
	held := r.newLease()
	held.holder, held.now = "a", theirs.Now
	if ok, _, err := held.acquire(ctxT(t)); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if !held.valid() {
		t.Fatal("a lease just acquired is not valid")
	}
	other := r.newLease()
	if ok, v, err := other.acquire(ctxT(t)); ok || err != nil || v.Holder != "a" {
		t.Fatalf("acquire of a live lease: ok=%v holder=%q err=%v, want held by a", ok, v.Holder, err)
	}
	ours.advance(30 * time.Minute)
	if ok, _, err := other.acquire(ctxT(t)); ok || err != nil {
		t.Fatalf("acquire half a TTL later: ok=%v err=%v, want still held", ok, err)
	}
	ours.advance(31 * time.Minute)
	if ok, _, err := other.acquire(ctxT(t)); !ok || err != nil {
		t.Fatalf("acquire a TTL after the lease last moved: ok=%v err=%v, want taken over", ok, err)
	}
	theirs.advance(40 * time.Minute)
	if held.valid() {
		t.Fatal("the old holder may still write 40 minutes (of a 1h TTL) after its last renewal")
	}
}
