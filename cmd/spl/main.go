// Command spl writes to and reads from an spl record log: session
// checkpoints, raw records, thread tails. Run "spl help" for the commands,
// the environment and the exit codes.
package main

import (
	"os"

	"github.com/spl-dev/spl/cmd/spl/cli"
)

func main() {
	// Execute closes every client it opened before it returns, so nothing
	// is left to flush when os.Exit runs.
	os.Exit(cli.Execute())
}
