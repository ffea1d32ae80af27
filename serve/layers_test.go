package serve

import (
	"go/build"
	"path/filepath"
	"slices"
	"testing"
)

// The layers' arrows (docs/design.md, "Arrows point one way"), as the
// production files import them: spl serve and the CLI reach the log and
// the read models through the service layer (sdk) alone, and records
// imports no NATS code.
func TestLayers(t *testing.T) {
	const mod = "github.com/spl-dev/spl/"
	for _, c := range []struct {
		dir    string
		banned []string
	}{
		{".", []string{mod + "projections", mod + "projections/fold"}},
		{"../cmd/spl", []string{mod + "log", mod + "projections", mod + "internal/natsio"}},
		{"../cmd/spl/cli", []string{mod + "log", mod + "projections", mod + "internal/natsio"}},
		{"../records", []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream", mod + "internal/natsio"}},
	} {
		p, err := build.ImportDir(c.dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		if len(p.Imports) == 0 {
			t.Fatalf("%s: no imports read", c.dir)
		}
		for _, b := range c.banned {
			if slices.Contains(p.Imports, b) {
				t.Errorf("%s imports %s", filepath.Clean(c.dir), b)
			}
		}
	}
}
