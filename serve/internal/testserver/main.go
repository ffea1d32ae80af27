// Command testserver runs serve.Run from flags, for the fault tests in
// e2e/, which kill it with SIGKILL; the spl serve command is the real
// entry point. Once the log is open it prints one line to standard output:
//
//	ready nats=<url> http=<host:port>
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/serve"
)

func main() {
	var cfg serve.Config
	var routes string
	flag.StringVar(&cfg.Dir, "dir", "", "data directory")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "NATS client listener")
	flag.StringVar(&cfg.HTTP, "http", "127.0.0.1:0", "HTTP API listener")
	flag.BoolVar(&cfg.NoHTTP, "no-http", false, "no HTTP API")
	flag.StringVar(&cfg.ServerName, "name", "", "server name")
	flag.StringVar(&cfg.ClusterName, "cluster-name", "", "cluster name")
	flag.StringVar(&cfg.ClusterListen, "cluster", "", "route listener")
	flag.StringVar(&routes, "routes", "", "comma-separated route URLs")
	flag.IntVar(&cfg.Replicas, "replicas", 0, "stream replicas")
	flag.DurationVar(&cfg.Timeout, "timeout", 0, "log request timeout")
	flag.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", false, "no authentication")
	tokenFile := flag.String("token-file", "", "NATS token (and HTTP write token) in this file; default: the directory's")
	projectors := flag.Bool("projections", false, "run the index projection, as spl serve does")
	flag.Parse()
	if *tokenFile != "" {
		tok, err := sdk.ReadTokenFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
		cfg.Token = tok
	}
	if routes != "" {
		cfg.Routes = strings.Split(routes, ",")
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *projectors {
		cfg.Projectors = serve.IndexProjector(ctx, cfg, logger)
	}
	s, err := serve.New(cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
	if err := s.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
	select {
	case <-s.Ready():
		fmt.Printf("ready nats=%s http=%s\n", s.NATSURL(), s.HTTPAddr())
	case <-ctx.Done():
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "testserver: shutdown:", err)
		os.Exit(1)
	}
}
