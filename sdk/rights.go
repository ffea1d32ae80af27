package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// ErrNeedsAdmin reports a write of actor key bindings (the thread
// records.ActorThread: a binding, or the erasure of one) by a caller
// without the admin right, on a client made WithBindingsByAdmin. Nothing
// was written.
var ErrNeedsAdmin = errors.New("spl/sdk: needs the admin right")

// WithBindingsByAdmin makes the client write actor key bindings
// (records.ActorThread) only for a context marked AsAdmin: the rule of a
// server whose callers hold different rights (spl serve), where a DID is
// bound to a key by an administrator. Without it, whoever holds the
// client writes them (the owner of an embedded data directory).
func WithBindingsByAdmin() Option { return func(c *config) { c.bindingsByAdmin = true } }

type adminKey struct{}

// AsAdmin marks ctx as a call of a caller with the admin right (see
// WithBindingsByAdmin). The face that authenticated the caller sets it.
func AsAdmin(ctx context.Context) context.Context { return context.WithValue(ctx, adminKey{}, true) }

// mayWrite applies WithBindingsByAdmin to a write to thread.
func (c *Client) mayWrite(ctx context.Context, thread string) error {
	if !c.cfg.bindingsByAdmin || thread != records.ActorThread {
		return nil
	}
	if admin, _ := ctx.Value(adminKey{}).(bool); admin {
		return nil
	}
	return fmt.Errorf("%w: thread %s holds the actor key bindings, which an administrator writes (the server's admin token, admin-token in its data directory)", ErrNeedsAdmin, records.ActorThread)
}
