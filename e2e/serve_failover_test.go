package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// maxFailover bounds the time from killing the stream leader to the
// first append acknowledged after it.
const maxFailover = 5 * time.Second

// TestServeClusterFailoverTime kills the stream leader of a 3-node
// cluster under 4 writers (with the SDK's default 10 s request
// timeout) three times, the kills 5 to 10 s apart (the
// killed node comes back in between), and measures the time from each
// kill to the first acknowledged append, and to the first of every
// writer: each at most maxFailover. No acknowledged record is lost.
func TestServeClusterFailoverTime(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("fault test")
	}
	nodes, urls := startCluster(t)
	all := strings.Join(urls, ",")
	var as []*appender
	for w := range 4 {
		// The SDK's default request timeout: failover must not
		// depend on waiting it out.
		as = append(as, newAppenderTimeout(t, all, fmt.Sprintf("failover-w%d", w), 3, 10*time.Second))
	}
	halt := startWriters(as)
	defer halt()
	counts := func() []int {
		var n []int
		for _, a := range as {
			n = append(n, a.acks())
		}
		return n
	}
	sum := func(n []int) (s int) {
		for _, v := range n {
			s += v
		}
		return s
	}
	waitFor(t, 15*time.Second, "appends before the first kill", func() bool { return sum(counts()) >= 40 })

	js := as[0].conn.JS
	var worst time.Duration
	for k := range 3 {
		leader := streamInfo(t, js).Cluster.Leader
		victim := nodes[leader]
		if victim == nil {
			t.Fatalf("kill %d: stream leader %q is none of the nodes", k, leader)
		}
		victim.kill()
		killed := time.Now()
		before := counts()
		var first time.Duration
		each := make([]time.Duration, len(as))
		for time.Since(killed) < 30*time.Second {
			now := counts()
			done := true
			for i := range as {
				if each[i] == 0 && now[i] > before[i] {
					each[i] = time.Since(killed)
					if first == 0 {
						first = each[i]
					}
				}
				done = done && each[i] > 0
			}
			if done {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		slowest := time.Duration(0)
		for _, d := range each {
			if d == 0 {
				t.Fatalf("kill %d of %s: a writer got no ack in 30s (each %v)", k, leader, each)
			}
			slowest = max(slowest, d)
		}
		t.Logf("kill %d of leader %s: first ack after %v, every writer's after %v (%v)", k, leader, first.Round(time.Millisecond), slowest.Round(time.Millisecond), each)
		worst = max(worst, slowest)
		if slowest > maxFailover {
			t.Errorf("kill %d: failover took %v, want at most %v", k, slowest, maxFailover)
		}
		// Back, and the next kill 5 to 10 s after this one.
		victim.start()
		victim.wait(30 * time.Second)
		time.Sleep(time.Until(killed.Add(time.Duration(5000+k*2000) * time.Millisecond)))
	}
	halt()
	waitFor(t, 20*time.Second, "replicas in sync", func() bool {
		info := streamInfo(t, js)
		for _, p := range info.Cluster.Replicas {
			if !p.Current || p.Lag > 0 {
				return false
			}
		}
		return len(info.Cluster.Replicas) == len(nodes)-1
	})
	for _, a := range as {
		a.check(t, as[0].l)
	}
	t.Logf("slowest failover %v; %d records acknowledged", worst.Round(time.Millisecond), sum(counts()))
	for _, n := range nodes {
		n.stop(30 * time.Second)
	}
}
