// Command powerwriter appends to the log for the power-loss tests in
// e2e/, which cut the power under it: it prints one line per
// acknowledged append, so that the test knows every ack that reached a
// caller before the cut.
//
//	powerwriter -dir DIR|-server URL [-token T] -threads a,b [-cycle N] [-pad B]   append until killed:
//	    ready
//	    ack <thread> <id>
//	powerwriter -dir DIR|-server URL -threads a,b -check       print what the log holds:
//	    have <thread> <id>
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

func main() {
	dir := flag.String("dir", "", "data directory of the embedded log")
	url := flag.String("server", "", "NATS URL of spl serve")
	threads := flag.String("threads", "", "comma-separated threads, one appender each")
	cycle := flag.Int("cycle", 0, "goes in every body, to tell runs apart")
	check := flag.Bool("check", false, "print the ids the threads hold and exit")
	nosync := flag.Bool("nosync", false, "log.Options.NoSync: no fsync before the ack (the tests' control)")
	token := flag.String("token", "", "the NATS token of spl serve (with -server)")
	pad := flag.Int("pad", 200, "bytes of padding in every body (large ones fill message blocks fast)")
	flag.Parse()
	var natsOpts []nats.Option
	if *token != "" {
		natsOpts = append(natsOpts, nats.Token(*token))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	l, err := log.Open(ctx, log.Options{Dir: *dir, URL: *url, NATSOptions: natsOpts, Timeout: 5 * time.Second, Linger: time.Millisecond, NoSync: *nosync})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "powerwriter: open:", err)
		os.Exit(1)
	}
	defer l.Close()
	var mu sync.Mutex // one line at a time on stdout
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	if *check {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, t := range strings.Split(*threads, ",") {
			for e, err := range l.Read(ctx, t) {
				if err != nil {
					fmt.Fprintln(os.Stderr, "powerwriter: read:", err)
					os.Exit(1)
				}
				say("have %s %s", t, e.ID)
			}
		}
		return
	}
	say("ready")
	var wg sync.WaitGroup
	for _, t := range strings.Split(*threads, ",") {
		wg.Go(func() {
			for n := 0; ; n++ {
				// Random padding: stored as it is (it does not compress), so
				// that large bodies fill message blocks as fast as they say.
				fill := make([]byte, *pad)
				_, _ = rand.Read(fill)
				rec, err := records.New(records.ActDo, "agent.step", t, "did:sync:agent:power", time.Now(),
					map[string]any{"cycle": *cycle, "n": n, "pad": fill})
				if err != nil {
					panic(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				e, err := l.Append(ctx, rec)
				cancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "powerwriter: append:", err)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				say("ack %s %s", t, e.ID)
			}
		})
	}
	wg.Wait()
}
