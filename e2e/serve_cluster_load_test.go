package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeClusterNoConflict runs a clustered load with no fault: 3 nodes,
// 3 writer processes (each a log of its own, on its own connection), each
// with 4 callers appending to threads of their own, and one more caller
// appending to a thread that every process writes. No thread but that
// one has two writers, so no append to them may be refused as a conflict
// (they share group commits with the contended thread); and the writers,
// all alike, must be served alike: the busiest within 2× of the least.
func TestServeClusterNoConflict(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("load test")
	}
	nodes, urls := startCluster(t)
	all := strings.Join(urls, ",")

	const (
		procs   = 3
		callers = 4
		run     = 15 * time.Second
	)
	var byProc [procs][]*appender
	for p := range procs {
		base := newAppender(t, all, fmt.Sprintf("load-p%d-c0", p), 3)
		byProc[p] = append(byProc[p], base)
		for c := 1; c < callers; c++ {
			byProc[p] = append(byProc[p], base.share(fmt.Sprintf("load-p%d-c%d", p, c)))
		}
	}
	var shared []*appender
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range procs {
		for _, a := range byProc[p] {
			wg.Go(func() { a.run(stop, 1_000_000) })
		}
		// The contended thread: its refusals are the expected ones.
		sh := byProc[p][0].share("load-shared")
		shared = append(shared, sh)
		wg.Go(func() { sh.run(stop, 1_000_000) })
	}
	time.Sleep(run)
	close(stop)
	wg.Wait()

	var acks [procs]int
	fails := 0
	for p := range procs {
		for _, a := range byProc[p] {
			a.mu.Lock()
			acks[p] += a.count
			fails += a.fails
			if a.fails > 0 {
				t.Errorf("%s: %d appends refused; first: %v", a.thread, a.fails, a.firstErr)
			}
			a.mu.Unlock()
		}
	}
	lo, hi := acks[0], acks[0]
	for _, n := range acks {
		lo, hi = min(lo, n), max(hi, n)
	}
	t.Logf("%v: acknowledged per writer process %v, %d refused", run, acks, fails)
	for p, a := range shared {
		a.mu.Lock()
		t.Logf("contended thread, process %d (on %s): %d acknowledged, %d refused", p, a.conn.NC.ConnectedServerName(), a.count, a.fails)
		a.mu.Unlock()
	}
	if lo == 0 || hi > 2*lo {
		t.Errorf("writers served unfairly: acknowledged %v (busiest over twice the least)", acks)
	}
	for p := range procs {
		for _, a := range byProc[p] {
			a.check(t, byProc[0][0].l)
		}
	}
	for _, n := range nodes {
		n.stop(30 * time.Second)
	}
}
