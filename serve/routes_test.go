package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestRoutesNeedTheSecret: a cluster node's route listener takes as a
// peer only a server that presents the cluster's secret. A rogue
// nats-server on the same machine that routes to it without the secret
// (or with a wrong one) is refused; the same server with the secret
// joins, so the refusal is the secret's doing.
func TestRoutesNeedTheSecret(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	var addrs [2]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	routeAddr := addrs[0]
	node := func(i int) Config {
		return Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", NoHTTP: true, ServerName: fmt.Sprintf("n%d", i+1), ClusterName: "c",
			ClusterListen: addrs[i], Routes: []string{"nats://" + addrs[1-i]}, RouteSecret: secret, Replicas: 1}
	}
	// Two nodes, started together: a cluster's JetStream waits for its peers.
	var nodes [2]*Server
	errs := make(chan error, 2)
	for i := range nodes {
		s, err := New(node(i), nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		nodes[i] = s
		go func() { errs <- s.Start(context.Background()) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	s := nodes[0]
	// routedTo reports whether node s has a route to the server with id.
	routedTo := func(id string) bool {
		rz, err := s.ns.Routez(&server.RoutezOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteID == id {
				return true
			}
		}
		return false
	}
	if !routedTo(nodes[1].ns.ID()) {
		t.Fatal("the two nodes, which share the secret, have no route")
	}
	rogue := func(name string, user *url.Userinfo) *server.Server {
		ns, err := server.NewServer(&server.Options{ServerName: name, Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: -1},
			Routes:  []*url.URL{{Scheme: "nats", Host: routeAddr, User: user}}})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(ns.Shutdown)
		return ns
	}
	for _, c := range []struct {
		name string
		user *url.Userinfo
	}{{"no secret", nil}, {"a wrong secret", url.UserPassword(RouteUser, "not the secret at all, no")}, {"another user", url.UserPassword("admin", secret)}} {
		r := rogue("rogue", c.user)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			// The node registers a route only once it took the peer's
			// credentials; the rogue's own count may show a handshake
			// that the node then refuses.
			if routedTo(r.ID()) {
				t.Fatalf("a rogue server with %s joined the routes", c.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := r.NumRoutes(); n != 0 {
			t.Fatalf("a rogue server with %s has %d routes after %v", c.name, n, 3*time.Second)
		}
		r.Shutdown()
	}
	r := rogue("peer", url.UserPassword(RouteUser, secret))
	deadline := time.Now().Add(15 * time.Second)
	for !routedTo(r.ID()) {
		if time.Now().After(deadline) {
			t.Fatal("a server with the secret never joined: the refusals above prove nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Shutdown()

	// A cluster without a secret does not start.
	cfg := node(0)
	cfg.RouteSecret, cfg.Dir = "", t.TempDir()
	var ce *ConfigError
	if _, err := New(cfg, nil); !errors.As(err, &ce) || ce.Field != "RouteSecret" {
		t.Fatalf("New of a cluster without a route secret: %v, want a ConfigError on RouteSecret", err)
	}
	cfg.InsecureRoutes = true
	if _, err := New(cfg, nil); err != nil {
		t.Fatalf("New with InsecureRoutes: %v", err)
	}
}
