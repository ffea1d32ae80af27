package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// TestServeClusterFailover runs a 3-node cluster of spl serve processes on
// loopback, the stream with 3 replicas, 4 writers appending through all
// three URLs. It kills the stream leader with SIGKILL: the writers go on
// after the failover, the node comes back and catches up, and no
// acknowledged record is lost.
func TestServeClusterFailover(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("fault test")
	}
	nodes, urls := startCluster(t)
	all := strings.Join(urls, ",")

	var as []*appender
	for w := range 4 {
		as = append(as, newAppender(t, all, fmt.Sprintf("cluster-w%d", w), 3))
	}
	total := func() int {
		n := 0
		for _, a := range as {
			n += a.acks()
		}
		return n
	}
	halt := startWriters(as)
	defer halt()
	waitFor(t, 15*time.Second, "appends before the kill", func() bool { return total() >= 40 })

	js := as[0].conn.JS
	info := streamInfo(t, js)
	if got, want := info.Config.Replicas, 3; got != want {
		t.Fatalf("stream replicas=%d, want %d", got, want)
	}
	leader := info.Cluster.Leader
	victim := nodes[leader]
	if victim == nil {
		t.Fatalf("stream leader %q is none of the nodes", leader)
	}
	victim.kill()
	killedAt := total()
	t.Logf("killed the stream leader %s at %d acknowledged records", leader, killedAt)
	waitFor(t, 30*time.Second, "appends after the failover", func() bool { return total() >= killedAt+40 })
	failover := total()

	victim.start()
	victim.wait(30 * time.Second)
	waitFor(t, 30*time.Second, leader+" catches up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, log.DefaultStream)
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil {
			return false
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return false
			}
		}
		return len(ci.Replicas) == len(nodes)-1
	})
	waitFor(t, 15*time.Second, "appends after the return", func() bool { return total() >= failover+40 })
	halt()

	// Reads are direct gets, which any replica close enough to the leader
	// answers: wait until every replica has applied everything.
	waitFor(t, 20*time.Second, "replicas in sync", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, log.DefaultStream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return false
		}
		for _, p := range s.CachedInfo().Cluster.Replicas {
			if !p.Current || p.Lag > 0 {
				return false
			}
		}
		return true
	})
	for _, a := range as {
		a.check(t, as[0].l)
	}
	rep := verifyAll(t, as[0].l)
	if !rep.OK() {
		t.Fatalf("VerifyAll: corrupt %v, missing %v", rep.Corrupt, rep.Missing)
	}
	t.Logf("acknowledged %d records; verified %d; new leader %s", total(), rep.Checked, streamInfo(t, js).Cluster.Leader)
	for _, n := range nodes {
		n.stop(30 * time.Second)
	}
}

// startCluster starts a 3-node cluster of spl serve processes on
// loopback, the stream with 3 replicas, and returns the nodes by name
// and their client URLs.
func startCluster(t *testing.T, extra ...string) (map[string]*node, []string) {
	t.Helper()
	const size = 3
	var client, route [size]int
	for i := range size {
		client[i], route[i] = freePort(t), freePort(t)
	}
	nodes := map[string]*node{}
	var urls []string
	// The secret the nodes share: routes without it are refused.
	secret := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(secret, []byte("e2e-route-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range size {
		var routes []string
		for j := range size {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", route[j]))
			}
		}
		name := fmt.Sprintf("n%d", i+1)
		nodes[name] = newNode(t, name, append([]string{
			"--home", t.TempDir(), "--name", name,
			"--listen", fmt.Sprintf("127.0.0.1:%d", client[i]), "--no-http",
			"--cluster-name", "spl-e2e", "--cluster", fmt.Sprintf("127.0.0.1:%d", route[i]), "--cluster-secret-file", secret,
			"--routes", strings.Join(routes, ","), "--replicas", "3", "--request-timeout", "2s"}, extra...)...)
		urls = append(urls, natsURL(client[i]))
	}
	for _, n := range nodes {
		n.start()
	}
	for _, n := range nodes {
		n.wait(45 * time.Second)
	}
	return nodes, urls
}

func streamInfo(t *testing.T, js jetstream.JetStream) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		t.Fatalf("stream has no cluster info")
	}
	return info
}

// The same record sent to the door of one node and then to the doors of
// the others, as a client's first send that reached a node late, after
// the client had given up on it and sent it again elsewhere, where it
// landed: stored once, and every answer names the one copy. The other
// nodes' writers never saw the first copy land; they find it as the
// thread's head. (Each node's door takes the requests of its own clients
// where it can, but a queue group may hand one to another node: so each
// node is asked twice.)
func TestDoorSameRecordOnTwoNodes(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("fault test")
	}
	_, urls := startCluster(t)
	rec, err := records.New(records.ActDo, "agent.step", "th_door_twice", "did:sync:agent:fault", time.Now(), map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	data, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req, err := cbor.Marshal(log.DoorAppendRequest{Items: []log.DoorItem{{Record: data}}, Budget: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	var got []log.DoorResult
	for _, u := range append(slices.Clone(urls), urls...) {
		nc, err := nats.Connect(u, nats.Token(testToken))
		if err != nil {
			t.Fatal(err)
		}
		m, err := nc.Request(log.DoorSubject(log.DoorWrite, log.DoorAppend), req, 15*time.Second)
		nc.Close()
		if err != nil {
			t.Fatalf("append through %s: %v", u, err)
		}
		var rep log.DoorAppendReply
		if err := cbor.Unmarshal(m.Data, &rep); err != nil || rep.Err != nil || len(rep.Results) != 1 || rep.Results[0].Err != nil {
			t.Fatalf("append through %s: %+v, %v", u, rep, err)
		}
		got = append(got, rep.Results[0])
	}
	for i, r := range got[1:] {
		if !bytes.Equal(r.ID, got[0].ID) || r.Clock != got[0].Clock {
			t.Fatalf("send %d was answered %x@%d, the first %x@%d: want the one copy", i+2, r.ID, r.Clock, got[0].ID, got[0].Clock)
		}
	}
	a := newAppender(t, urls[2], "th_door_twice", 3)
	n := 0
	for _, err := range a.l.Read(context.Background(), "th_door_twice") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("the thread holds %d records, want 1", n)
	}
}
