package serve

import (
	"context"
	"time"
)

// markEvery is how often the server raises the log's high-water mark to
// the stream's last record. Its own writer raises it after its appends;
// this covers the appends of NATS clients, which reach the stream past it.
const markEvery = time.Second

// keepMark raises the mark every markEvery until the server shuts down
// (the log's Close writes the last one).
func (s *Server) keepMark() {
	defer s.bgWG.Done()
	t := time.NewTicker(markEvery)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
		if err := s.c.Load().MarkNow(ctx); err != nil && s.bg.Err() == nil {
			s.logger.Warn("high-water mark not raised", "err", err)
		}
		cancel()
	}
}
