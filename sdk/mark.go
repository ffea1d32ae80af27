package sdk

import (
	"context"

	splog "github.com/spl-dev/spl/log"
)

// MarkLoss is a log behind its high-water mark: records acknowledged once
// are gone (a purged, deleted or rolled-back stream). See log.CheckMark.
type MarkLoss = splog.MarkLoss

// ErrLoss is what every *MarkLoss is (errors.Is).
var ErrLoss = splog.ErrLoss

// CheckMark compares the log with the high-water mark its data directory
// keeps, and returns the loss it finds, or nil. A client of spl serve's
// door gets the server's (it keeps the mark); a client of another remote
// NATS server keeps none and gets nil.
func (c *Client) CheckMark(ctx context.Context) (*MarkLoss, error) { return c.log.CheckMark(ctx) }

// MarkNow raises the high-water mark to the log's last record, whoever
// appended it. spl serve calls it for the appends its NATS clients make
// past its own writer.
func (c *Client) MarkNow(ctx context.Context) error { return c.log.MarkNow(ctx) }
