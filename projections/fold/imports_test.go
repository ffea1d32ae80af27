package fold

import (
	"go/build"
	"strings"
	"testing"
)

// The fold is pure: it imports the standard library and records, nothing
// that could reach NATS or the log.
func TestImportsOnlyRecords(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range append(pkg.Imports, pkg.TestImports...) {
		first, _, _ := strings.Cut(imp, "/")
		std := !strings.Contains(first, ".")
		if !std && imp != "github.com/spl-dev/spl/records" && !strings.HasPrefix(imp, "github.com/spl-dev/spl/records/") {
			t.Errorf("package fold imports %s: want only the standard library and records", imp)
		}
	}
}
