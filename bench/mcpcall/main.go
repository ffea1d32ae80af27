// Command mcpcall compares a tools/call round trip of spl mcp over stdio
// with the spl command doing the same read, in the same run: the latest
// checkpoint of a thread, by the MCP tool latest_checkpoint (through the
// official Go SDK's client, on one spl mcp process) and by spl session
// show (a process each, as a user runs it), on one data directory. It
// prints one JSON object: each p50 and their ratio.
//
//	go run ./bench/mcpcall -spl ./spl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spl-dev/spl/bench/internal/stat"
)

func main() {
	bin := flag.String("spl", "spl", "the spl binary")
	calls := flag.Int("n", 200, "tools/call round trips")
	runs := flag.Int("cli", 30, "spl session show runs")
	flag.Parse()
	home, err := os.MkdirTemp("", "mcpcall-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(home)
	env := append(os.Environ(), "SPL_HOME="+home, "SPL_ACTOR=did:sync:agent:bench")
	spl := func(args ...string) *exec.Cmd {
		c := exec.Command(*bin, args...)
		c.Env = env
		return c
	}
	if out, err := spl("session", "save", "--thread", "th_bench", "--summary", "Completed auth refactor",
		"--learnings", "mutex pattern worked", "--next-steps", "Write migration tests").CombinedOutput(); err != nil {
		fail(fmt.Errorf("session save: %v\n%s", err, out))
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: spl("mcp")}, nil)
	if err != nil {
		fail(err)
	}
	defer cs.Close()
	call := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "latest_checkpoint", Arguments: map[string]any{"thread": "th_bench"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("latest_checkpoint: tool error")
		}
		return err
	}
	if err := call(); err != nil { // the session is up
		fail(err)
	}
	var mcpMS, cliMS []float64
	for range *calls {
		t := time.Now()
		if err := call(); err != nil {
			fail(err)
		}
		mcpMS = append(mcpMS, stat.MS(time.Since(t)))
	}
	for range *runs {
		t := time.Now()
		if out, err := spl("session", "show", "th_bench").CombinedOutput(); err != nil {
			fail(fmt.Errorf("session show: %v\n%s", err, out))
		}
		cliMS = append(cliMS, stat.MS(time.Since(t)))
	}
	m, c := stat.P50(mcpMS), stat.P50(cliMS)
	_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{"tools_call_p50_ms": m, "cli_p50_ms": c, "tools_call_over_cli": m / c})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mcpcall:", err)
	os.Exit(1)
}
