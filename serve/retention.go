package serve

import (
	"context"
)

// enforceRetention runs the retention policies on every thread every
// Config.RetentionEvery, as Config.RetentionActor, until the server shuts
// down. Each run is bounded by the period, so that a slow one cannot pile
// up behind the next; a thread a run could not finish is taken up by the
// next run (or the next save). In a cluster every node runs it: the
// erasure records are conditional on the thread, so two nodes erase each
// checkpoint once.
func (s *Server) enforceRetention() {
	s.every(s.cfg.RetentionEvery, func() {
		ctx, cancel := context.WithTimeout(s.bg, s.cfg.RetentionEvery)
		defer cancel()
		res, err := s.c.Load().ApplyRetention(ctx, s.cfg.RetentionActor)
		erased := 0
		for _, r := range res {
			erased += len(r.Erased)
		}
		s.m.retained.Add(float64(erased))
		switch {
		case err != nil && s.bg.Err() == nil:
			s.logger.Warn("retention: not applied to every thread", "threads", len(res), "erased", erased, "err", err)
		case erased > 0:
			s.logger.Info("retention applied", "threads", len(res), "erased", erased)
		}
	})
}
