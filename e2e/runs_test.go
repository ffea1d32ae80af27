package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	runnerOnce sync.Once
	runnerBin  string
	runnerErr  error
)

// buildRunner builds examples/runner once for the package, beside the
// spl binary, in the directory TestMain removes when the tests end.
func buildRunner(t *testing.T) string {
	t.Helper()
	runnerOnce.Do(func() {
		runnerBin = filepath.Join(filepath.Dir(splBin), "runner")
		args := []string{"build", "-o", runnerBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		b := exec.Command("go", append(args, "./examples/runner")...)
		b.Dir = ".."
		if out, err := b.CombinedOutput(); err != nil {
			runnerErr = fmt.Errorf("go build ./examples/runner: %v\n%s", err, out)
		}
	})
	if runnerErr != nil {
		t.Fatal(runnerErr)
	}
	return runnerBin
}

type runnerOut struct {
	Result   json.RawMessage `json:"result"`
	Stored   bool            `json:"stored"`
	LLMCalls int             `json:"llm_calls_this_process"`
	Ran      int             `json:"ran_effects"`
	Replayed int             `json:"replayed_effects"`
	Waiting  string          `json:"waiting_for"`
}

// runner runs the example on h; killed says whether it died of SIGKILL.
func (h *home) runner(t *testing.T, bin string, args ...string) (out runnerOut, killed bool) {
	t.Helper()
	return runRunner(t, append([]string{bin}, args...), h.env)
}

// runRunner runs a runner (argv) with env and decodes what it prints;
// killed says whether it died of SIGKILL.
func runRunner(t *testing.T, argv, env []string) (out runnerOut, killed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return out, true
		}
	}
	if err != nil {
		t.Fatalf("runner %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("runner %s: output %q: %v\n%s", argv[0], stdout.String(), err, stderr.String())
	}
	return out, false
}

// checkEffects checks that file holds exactly one line per tool call.
func checkEffects(t *testing.T, file string, tools int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var want []string
	for i := range tools {
		want = append(want, fmt.Sprintf(`call-%d {"n":%d}`, i, i))
	}
	slices.Sort(lines)
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("effects file:\n%s\nwant one line per call (%d)", data, tools)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// TestRunnerKilledAtEveryPoint kills the example runner with SIGKILL at
// every phase, inside a tool batch and between a tool's side effect and
// its record, starts it again, and checks one line per tool call, the
// same result as a run never killed, and that a finished run returns its
// stored result without calling the LLM or a tool.
func TestRunnerKilledAtEveryPoint(t *testing.T) {
	needFaults(t)
	bin := buildRunner(t)
	const tools = 7
	ref := newHome(t)
	want, _ := ref.runner(t, bin, "--run", "R", "--tools", fmt.Sprint(tools), "--effects", filepath.Join(ref.dir, "..", "eff"))
	checkEffects(t, filepath.Join(ref.dir, "..", "eff"), tools)

	cases := [][]string{
		{"run_started:1"}, {"step_started:1"}, {"step_started:2"}, {"pre_llm:1"}, {"pre_llm:3"},
		{"llm:1"}, {"llm:2"}, {"post_llm:1"}, {"post_llm:3"}, {"pre_tool_batch:1"}, {"pre_tool_batch:2"},
		{"tool:1"}, {"tool:5"}, {"tool_written:1"}, {"tool_written:2"}, {"tool_written:7"},
		{"effect:3"}, {"effect:7"}, {"post_tool_batch:1"}, {"post_tool_batch:3"}, {"finish:1"},
		// Killed again while resuming.
		{"tool_written:2", "tool_written:1", "post_llm:1", "effect:2"},
	}
	for _, points := range cases {
		t.Run(strings.Join(points, ","), func(t *testing.T) {
			h := newHome(t)
			eff := filepath.Join(h.dir, "..", "eff")
			llm := filepath.Join(h.dir, "..", "llm")
			args := []string{"--run", "R", "--tools", fmt.Sprint(tools), "--effects", eff, "--llm-log", llm}
			for _, p := range points {
				if _, killed := h.runner(t, bin, append(args, "--crash-at", p)...); !killed {
					t.Fatalf("not killed at %s", p)
				}
			}
			got, _ := h.runner(t, bin, args...)
			if got.Stored || string(got.Result) != string(want.Result) {
				t.Fatalf("result %s (stored %v), want %s", got.Result, got.Stored, want.Result)
			}
			checkEffects(t, eff, tools)
			checkLLMCalls(t, llm, points)
			effBefore, llmBefore := readFile(t, eff), readFile(t, llm)
			again, _ := h.runner(t, bin, args...)
			if !again.Stored || string(again.Result) != string(want.Result) || again.LLMCalls != 0 || again.Ran != 0 {
				t.Fatalf("after finish: %+v, want the stored result", again)
			}
			if readFile(t, eff) != effBefore || readFile(t, llm) != llmBefore {
				t.Fatal("a finished run called the LLM or a tool again")
			}
		})
	}
}

// checkLLMCalls checks that no LLM call whose response was recorded was
// made again: the runner's LLM log holds each step once, but for a kill
// between the LLM's answer and its checkpoint (point llm), which may
// make that step's call once more, and no more.
func checkLLMCalls(t *testing.T, path string, points []string) {
	t.Helper()
	again := 0
	for _, p := range points {
		if strings.HasPrefix(p, "llm:") {
			again++
		}
	}
	seen := map[string]int{}
	extra := 0
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, path)), "\n") {
		if seen[line]++; seen[line] > 1 {
			extra++
		}
	}
	if extra > again {
		t.Fatalf("%d LLM calls made again (%d kills between an answer and its checkpoint):\n%s", extra, again, readFile(t, path))
	}
}

// TestRunnerKilledAtRandom kills the runner from outside after a few
// milliseconds, again and again, until it finishes.
func TestRunnerKilledAtRandom(t *testing.T) {
	needFaults(t)
	bin := buildRunner(t)
	const tools = 30
	h := newHome(t)
	eff := filepath.Join(h.dir, "..", "eff")
	args := []string{"--run", "R", "--tools", fmt.Sprint(tools), "--effects", eff}
	for i := range 8 {
		c := exec.Command(bin, args...)
		c.Env = h.env
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(150+i*60) * time.Millisecond)
		_ = c.Process.Signal(syscall.SIGKILL)
		_ = c.Wait()
	}
	ref := newHome(t)
	want, _ := ref.runner(t, bin, "--run", "R", "--tools", fmt.Sprint(tools), "--effects", filepath.Join(ref.dir, "..", "eff"))
	got, _ := h.runner(t, bin, args...)
	if string(got.Result) != string(want.Result) {
		t.Fatalf("result %s", got.Result)
	}
	checkEffects(t, eff, tools)
}
