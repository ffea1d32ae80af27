package sdk

import (
	"context"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// EraseThread erases every record of thread but its erasure records (they
// stay as the audit trail), as actor, for reason, through Erase: the
// messages leave the disk and the erasure records keep their headers. A
// thread with nothing left to erase gives an empty EraseResult and no
// error. A record appended while EraseThread runs may survive it.
func (c *Client) EraseThread(ctx context.Context, thread, actor, reason string) (EraseResult, error) {
	if err := records.CheckThread(thread); err != nil {
		return EraseResult{}, err
	}
	var ids []records.ID
	for rec, err := range c.QueryThread(ctx, thread) {
		if err != nil {
			return EraseResult{}, fmt.Errorf("erase thread %s: %w", thread, err)
		}
		if rec.Header.Kind != records.KindErasure {
			ids = append(ids, rec.ID)
		}
	}
	if len(ids) == 0 {
		return EraseResult{}, nil
	}
	return c.Erase(ctx, thread, actor, ids, reason)
}
