package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// Health is the state of the log as its health check sees it (Health).
type Health struct {
	// Status is "ok", or why not: "unavailable" (the stream cannot be
	// read), "loss" (the log is behind its high-water mark: acknowledged
	// records are gone), "changed" (the stream's configuration was
	// changed behind the log's back: log.ErrStreamChanged) or "corrupt"
	// (the newest record of the log fails verification).
	Status string
	// LastClock is the clock of the newest record (0: none, or unknown).
	LastClock uint64
	// Loss, for "loss", is the range of clocks missing.
	Loss *MarkLoss
	// Err says what is wrong; nil for "ok".
	Err error
}

// OK reports whether the log is healthy.
func (h Health) OK() bool { return h.Status == "ok" }

// Health checks the log: that its stream answers, holds every record up
// to the high-water mark, keeps the configuration the log needs, and
// that its newest record verifies. spl serve's /healthz answers it.
func (c *Client) Health(ctx context.Context) Health {
	st, err := c.log.State(ctx)
	h := Health{Status: "ok", LastClock: st.Stats.LastClock}
	switch {
	case err != nil:
		h.Status, h.Err = "unavailable", err
	case st.Loss != nil:
		h.Status, h.Loss, h.Err = "loss", st.Loss, st.Loss
	case st.Changed != nil:
		h.Status, h.Err = "changed", st.Changed
	}
	if !h.OK() {
		return h
	}
	if h.LastClock > 0 {
		_, err := c.log.At(ctx, h.LastClock)
		switch {
		case errors.Is(err, records.ErrCorrupt):
			h.Status, h.Err = "corrupt", fmt.Errorf("the newest record: %w", err)
		case err != nil && !errors.Is(err, ErrNotFound): // erased since: no record to check
			h.Status, h.Err = "unavailable", err
		}
	}
	return h
}
