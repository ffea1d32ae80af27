package serve

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// BenchmarkAppend compares durable appends (fsync before ack) in one run:
//
//   - embedded: the in-process log of a data directory, goroutines sharing
//     one Log (one writer, group commit across them);
//   - served: clients over TCP loopback to a Server, each client its own
//     connection and Log (group commit only within a client);
//   - served-shared: goroutines sharing one TCP client;
//   - cluster: the same against a 3-node cluster in this process, stream
//     with 3 replicas.
//
// Each reports appends/s and the p50 and p99 latency of one append.
//
//	go test ./serve -run '^$' -bench Append -benchtime 2000x
func BenchmarkAppend(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("embedded/clients=%d", clients), func(b *testing.B) {
			l, err := log.Open(context.Background(), log.Options{Dir: b.TempDir(), Linger: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			runAppends(b, repeat(l, clients))
		})
		b.Run(fmt.Sprintf("served/clients=%d", clients), func(b *testing.B) {
			s := start(b, Config{NoHTTP: true})
			runAppends(b, dialAll(b, s.NATSURL(), clients, 1, writeToken(b, s)...))
		})
	}
	b.Run("served-shared/goroutines=64", func(b *testing.B) {
		s := start(b, Config{NoHTTP: true})
		runAppends(b, repeat(dialAll(b, s.NATSURL(), 1, 1, writeToken(b, s)...)[0], 64))
	})
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("cluster3/clients=%d", clients), func(b *testing.B) {
			url := startCluster(b)
			runAppends(b, dialAll(b, url, clients, 3))
		})
	}
}

func repeat(l *log.Log, n int) []*log.Log {
	ls := make([]*log.Log, n)
	for i := range ls {
		ls[i] = l
	}
	return ls
}

// writeToken is the NATS option of s's write token: what every client of
// a default spl serve holds.
func writeToken(b *testing.B, s *Server) []nats.Option {
	b.Helper()
	tok, err := os.ReadFile(filepath.Join(s.cfg.Dir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	return []nats.Option{nats.Token(strings.TrimSpace(string(tok)))}
}

func dialAll(b *testing.B, url string, n, replicas int, opts ...nats.Option) []*log.Log {
	b.Helper()
	ls := make([]*log.Log, n)
	for i := range ls {
		l, err := log.Open(context.Background(), log.Options{URL: url, Replicas: replicas, NATSOptions: opts})
		if err != nil {
			b.Fatalf("open %s: %v", url, err)
		}
		b.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	return ls
}

// runAppends spreads b.N appends over the logs (one goroutine each, one
// thread each) and reports throughput and latency.
func runAppends(b *testing.B, ls []*log.Log) {
	ctx := context.Background()
	body := map[string]any{"step": 1, "tool": "grep", "note": "a typical small agent step"}
	var next atomic.Int64
	lat := make([][]time.Duration, len(ls))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() {
			thread := fmt.Sprintf("bench-%d", i)
			for next.Add(1) <= int64(b.N) {
				rec, err := records.New(records.ActDo, "agent.step", thread, actor, time.Now(), body)
				if err != nil {
					b.Error(err)
					return
				}
				t0 := time.Now()
				if _, err := l.Append(ctx, rec); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// startCluster runs a 3-node cluster in this process on loopback and
// returns the client URLs of all three.
func startCluster(b *testing.B) string {
	b.Helper()
	var routes [3]string
	var lns [3]net.Listener
	for i := range routes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[i] = ln
		routes[i] = "nats://" + ln.Addr().String()
	}
	for _, ln := range lns {
		ln.Close()
	}
	servers := make([]*Server, 3)
	for i := range servers {
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		cfg := Config{
			Dir: b.TempDir(), Listen: "127.0.0.1:0", NoHTTP: true,
			ServerName: fmt.Sprintf("b%d", i), ClusterName: "bench",
			ClusterListen: routes[i][len("nats://"):], Routes: others, RouteSecret: "bench-route-secret-0123456789",
		}
		s, err := New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
		servers[i] = s
	}
	url := ""
	for i, s := range servers {
		select {
		case <-s.Ready():
		case <-time.After(60 * time.Second):
			b.Fatalf("cluster node %d not ready", i)
		}
		if url != "" {
			url += ","
		}
		url += s.NATSURL()
	}
	return url
}
