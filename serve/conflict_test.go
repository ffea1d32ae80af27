package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/wire"
)

// TestConflictAnswer checks that an append that lost the race for its
// thread on every attempt (log.ErrConflict) is answered 409 with the JSON
// error body, and counted as a conflict.
func TestConflictAnswer(t *testing.T) {
	err := fmt.Errorf("append: spl/log: append: %w after 65 attempts: %w", log.ErrConflict, log.ErrExpectation)
	if got, want := appendResult(err), "conflict"; got != want {
		t.Errorf("appendResult=%q, want %q", got, want)
	}
	w := httptest.NewRecorder()
	(&Server{}).fail(w, httptest.NewRequest(http.MethodPost, "/v1/records", nil), err)
	if got, want := w.Code, http.StatusConflict; got != want {
		t.Fatalf("status=%d, want %d", got, want)
	}
	if got, want := w.Header().Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type=%q, want %q", got, want)
	}
	var e wire.Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if got, want := e, (wire.Error{Error: err.Error()}); got != want {
		t.Errorf("body=%+v, want %+v", got, want)
	}
}
