package e2e

import (
	"os"
	"testing"
)

// needFaults skips a fault test unless SPL_FAULTS=1. The fault tests kill
// spl processes with SIGKILL, fill disks, cut the power or kill cluster
// leaders: they take minutes and lean on the machine's timing, so
// `go test ./...` leaves them out and CI (.ci/run) runs them.
func needFaults(t *testing.T) {
	t.Helper()
	if os.Getenv("SPL_FAULTS") != "1" {
		t.Skip("fault test: set SPL_FAULTS=1 to run it (CI does)")
	}
}
