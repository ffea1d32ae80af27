package serve

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/sdk"
)

// IndexProjector returns a Config.Projectors that runs the index
// projection (thread index, latest checkpoints, erased records) in the
// server, its buckets with the replicas of the log's stream. A cluster
// node whose peers are not up yet cannot create replicated buckets: it
// retries for up to two minutes.
func IndexProjector(ctx context.Context, cfg Config, logger *slog.Logger) func(*sdk.Client) ([]Projector, error) {
	return func(c *sdk.Client) ([]Projector, error) {
		return indexProjectors(ctx, c, cfg, logger)
	}
}

func indexProjectors(ctx context.Context, c *sdk.Client, cfg Config, logger *slog.Logger) ([]Projector, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	plog := logger.With("component", "projections")
	wait := 500 * time.Millisecond
	for {
		r, err := newIndexRuntime(ctx, c, cfg, plog)
		if err == nil {
			return []Projector{r}, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		plog.Warn("projections not ready yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func newIndexRuntime(ctx context.Context, c *sdk.Client, cfg Config, plog *slog.Logger) (*projections.Runtime, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	replicas := cfg.Replicas
	if st, err := c.Stats(ctx); err == nil {
		replicas = st.Replicas
	} else if replicas == 0 && cfg.ClusterName != "" {
		replicas = 3 // serve's default in a cluster
	}
	return c.NewProjector(ctx, projections.Index(), projections.Options{
		Replicas: max(replicas, 1),
		Logf:     func(format string, args ...any) { plog.Warn(fmt.Sprintf(format, args...)) },
	})
}

// indexRuntime returns the runtime of the index projection that reads wait
// on: the server's projector, or, when the server runs none (no
// Config.Projectors, or they are not started yet or failed to), one of its
// own, made once, that nobody runs. Waiting on that one catches the index
// up in the request, for as long as the wait lasts, when no process holds
// the projection's lease (Runtime.Wait); the next request carries on from
// the position it stored.
func (s *Server) indexRuntime(ctx context.Context, c *sdk.Client) (*projections.Runtime, error) {
	s.projMu.Lock()
	ps := s.projectors
	s.projMu.Unlock()
	for _, p := range ps {
		if r, ok := p.(*projections.Runtime); ok && r.Name() == projections.IndexName {
			return r, nil
		}
	}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if s.index == nil {
		r, err := newIndexRuntime(ctx, c, s.cfg, s.logger.With("component", "projections"))
		if err != nil {
			return nil, err
		}
		s.index = r
	}
	return s.index, nil
}
