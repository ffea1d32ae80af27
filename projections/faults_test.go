package projections

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// errCrash is the cause of the end of a process that crashingStore
// crashed.
var errCrash = errors.New("simulated crash after storing the models")

// crashingStore is the Store of a process that crashes right after its
// first commit of models lands, before the runtime stores the position
// those models reach: it cancels the process's context with errCrash, and
// fails every later commit, as a process that is gone writes nothing.
type crashingStore struct {
	Store
	crash context.CancelCauseFunc

	mu      sync.Mutex
	crashed bool
}

// Commit implements Store.
func (s *crashingStore) Commit(ctx context.Context, ws []Write) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return nil, errCrash
	}
	if _, err := s.Store.Commit(ctx, ws); err != nil {
		return nil, err
	}
	s.crashed = true
	s.crash(errCrash)
	return nil, errCrash
}

// crashingCatchUp runs CatchUp to clock in a runtime whose process
// crashes after its first commit of models, and returns why CatchUp
// ended: errCrash when it crashed.
func crashingCatchUp(t *testing.T, r *Runtime, clock uint64) error {
	t.Helper()
	ctx, crash := context.WithCancelCause(ctxT(t))
	defer crash(nil)
	r.models = &crashingStore{Store: r.models, crash: crash}
	if err := r.CatchUp(ctx, clock); err == nil || ctx.Err() == nil {
		return err
	}
	return context.Cause(ctx)
}
