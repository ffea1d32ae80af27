package sdk_test

import (
	"errors"
	"testing"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/sdk"
)

// TestSplitErrors checks that a join of corrupt records splits into one
// error each, and that a corrupt record, which unwraps to several errors
// of its own, stays one.
func TestSplitErrors(t *testing.T) {
	a := &splog.CorruptError{Clock: 1, Reason: "a", Err: errors.New("cause")}
	b := &splog.CorruptError{Clock: 2, Reason: "b"}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"one corrupt record", a, 1},
		{"a join of two", errors.Join(a, b), 2},
		{"a plain error", errors.New("x"), 1},
	} {
		if got := len(sdk.SplitErrors(tc.err)); got != tc.want {
			t.Errorf("%s: %d errors, want %d", tc.name, got, tc.want)
		}
	}
}
