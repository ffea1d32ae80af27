package natsio

import (
	"sync"
	"time"
	_ "unsafe" // go:linkname
)

// nats-server's Raft election timeout: a follower that has heard nothing
// from its leader for a random time between these two starts an
// election. nats-server has no option for it (4 to 9 s, package
// variables that its own tests lower); these bind them. Should a
// nats-server upgrade rename them, the build fails at link time, loudly.
//
//go:linkname raftMinElection github.com/nats-io/nats-server/v2/server.minElectionTimeout
var raftMinElection time.Duration

//go:linkname raftMaxElection github.com/nats-io/nats-server/v2/server.maxElectionTimeout
var raftMaxElection time.Duration

// Election timeouts of the clusters spl serve runs: a killed leader is
// replaced within 1.5 to 3 s of its last heartbeat (sent every second)
// instead of nats-server's 4 to 9 s, which left appends unanswered for
// 6 to 8 s after each kill of the stream leader (faults.md, row 5). The
// floor stays well above the heartbeat, so that a follower does not
// call an election when a heartbeat is merely late.
const (
	ClusterMinElection = 1500 * time.Millisecond
	ClusterMaxElection = 3 * time.Second
)

var electionOnce sync.Once

// FastElections sets the election timeouts of every Raft group of the
// nats-servers in this process to ClusterMinElection..ClusterMaxElection.
// It is process-wide: call it before the first server starts (later
// calls do nothing). spl serve calls it when it runs a cluster node.
func FastElections() {
	electionOnce.Do(func() {
		raftMinElection, raftMaxElection = ClusterMinElection, ClusterMaxElection
	})
}
