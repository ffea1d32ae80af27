package serve

import (
	"context"
	"time"
)

// markEvery is how often the server raises the log's high-water mark to
// the stream's last record. Its own writer raises it after its appends,
// the door's included; this covers the admin's, which may publish to the
// stream past it.
const markEvery = time.Second

// keepMark raises the mark every markEvery until the server shuts down
// (the log's Close writes the last one).
func (s *Server) keepMark() {
	s.every(markEvery, func() {
		ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
		defer cancel()
		if err := s.c.Load().MarkNow(ctx); err != nil && s.bg.Err() == nil {
			s.logger.Warn("high-water mark not raised", "err", err)
		}
	})
}

// every runs f every d until the server shuts down; the caller has added
// it to s.bgWG.
func (s *Server) every(d time.Duration, f func()) {
	defer s.bgWG.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		f()
	}
}
