package serve

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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

func newIndexRuntime(ctx context.Context, c *sdk.Client, cfg Config, plog *slog.Logger) (Projector, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	replicas := cfg.Replicas
	if st, err := c.Stats(ctx); err == nil {
		replicas = st.Replicas
	} else if replicas == 0 && cfg.ClusterName != "" {
		replicas = 3 // serve's default in a cluster
	}
	return c.IndexProjector(ctx, replicas, func(format string, args ...any) { plog.Warn(fmt.Sprintf(format, args...)) })
}
