package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The three runners (examples/runner in Go, runner-py, runner-ts) are one
// program in three languages on one record format: the same flags, the
// same scripted LLM and tool, the same output. These tests run each
// against one spl serve, kill it at chosen points, and start it again.

// runnerLang is how to start the runner of one language.
type runnerLang struct {
	name string
	argv func(t *testing.T) []string // the command, before the runner's flags
	env  func(s *served) []string    // how it reaches the server
}

// runnerLangs returns the runners this machine can run. The Python one
// needs python3; the TypeScript one node and the SDK built in
// sdk/typescript (npm ci && npm run build), which .ci/sdks does before it
// runs these with SPL_RUNNERS_ALL=1: there a runner that cannot run
// fails the test rather than skips.
func runnerLangs(t *testing.T) []runnerLang {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	httpEnv := func(s *served) []string { return []string{"SPL_URL=" + s.http, "SPL_TOKEN=" + s.writeTok} }
	langs := []runnerLang{{
		name: "go",
		argv: func(t *testing.T) []string { return []string{buildRunner(t)} },
		env:  func(s *served) []string { return []string{"SPL_SERVER=" + s.nats, "SPL_TOKEN=" + s.writeTok} },
	}}
	all := os.Getenv("SPL_RUNNERS_ALL") == "1"
	missing := func(what string) {
		if all {
			t.Fatalf("SPL_RUNNERS_ALL=1 but %s", what)
		}
		t.Logf("skipping a runner: %s", what)
	}
	if py, err := exec.LookPath("python3"); err != nil {
		missing("python3 is not on PATH")
	} else {
		langs = append(langs, runnerLang{
			name: "py",
			argv: func(*testing.T) []string { return []string{py, filepath.Join(root, "examples/runner-py/runner.py")} },
			env: func(s *served) []string {
				return append(httpEnv(s), "PYTHONPATH="+filepath.Join(root, "sdk/python/src"))
			},
		})
	}
	node, err := exec.LookPath("node")
	switch {
	case err != nil:
		missing("node is not on PATH")
	case !exists(filepath.Join(root, "sdk/typescript/dist/index.js")):
		missing("sdk/typescript is not built (npm ci && npm run build)")
	default:
		langs = append(langs, runnerLang{
			name: "ts",
			argv: func(*testing.T) []string { return []string{node, filepath.Join(root, "examples/runner-ts/runner.mjs")} },
			env:  httpEnv,
		})
	}
	return langs
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// runLang runs lang's runner against s; killed says whether it died of
// SIGKILL.
func runLang(t *testing.T, s *served, lang runnerLang, args ...string) (out runnerOut, killed bool) {
	t.Helper()
	return runRunner(t, append(lang.argv(t), args...), append(append([]string{}, s.h.env...), lang.env(s)...))
}

// sameJSON says whether a and b are the same JSON value (the runners
// print their keys in their own orders).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestRunnersKilled kills each language's runner at points of every kind
// (a phase, the LLM's answer before its checkpoint, inside a tool batch,
// between a tool's side effect and its record, after a record, before
// the end, and again while resuming), starts it again, and checks one
// line per tool call, no recorded LLM call made again, the result of a
// run never killed, and that the finished run returns its stored result
// calling neither the LLM nor a tool.
func TestRunnersKilled(t *testing.T) {
	needFaults(t)
	h := newHome(t)
	s := serveHome(t, h)
	langs := runnerLangs(t)
	const tools = 7
	cases := [][]string{
		{"run_started:1"}, {"step_started:2"}, {"llm:1"}, {"post_llm:1"}, {"post_llm:3"}, {"pre_tool_batch:2"},
		{"tool:2"}, {"tool_written:1"}, {"effect:3"}, {"post_tool_batch:1"}, {"finish:1"},
		{"tool_written:2", "post_llm:1", "effect:2"},
	}
	dir := t.TempDir()
	var want json.RawMessage
	for _, lang := range langs {
		t.Run(lang.name, func(t *testing.T) {
			eff := filepath.Join(dir, lang.name+"-ref-eff")
			ref, _ := runLang(t, s, lang, "--run", lang.name+"-ref", "--tools", fmt.Sprint(tools), "--effects", eff)
			checkEffects(t, eff, tools)
			if want == nil {
				want = ref.Result
			} else if !sameJSON(ref.Result, want) {
				t.Fatalf("result %s, the Go runner's %s", ref.Result, want)
			}
			for i, points := range cases {
				t.Run(strings.Join(points, ","), func(t *testing.T) {
					run := fmt.Sprintf("%s-%d", lang.name, i)
					eff := filepath.Join(dir, run+"-eff")
					llm := filepath.Join(dir, run+"-llm")
					args := []string{"--run", run, "--tools", fmt.Sprint(tools), "--effects", eff, "--llm-log", llm}
					for _, p := range points {
						if _, killed := runLang(t, s, lang, append(args, "--crash-at", p)...); !killed {
							t.Fatalf("not killed at %s", p)
						}
					}
					got, _ := runLang(t, s, lang, args...)
					if got.Stored || !sameJSON(got.Result, want) {
						t.Fatalf("result %s (stored %v), want %s", got.Result, got.Stored, want)
					}
					checkEffects(t, eff, tools)
					checkLLMCalls(t, llm, points)
					effBefore, llmBefore := readFile(t, eff), readFile(t, llm)
					again, _ := runLang(t, s, lang, args...)
					if !again.Stored || !sameJSON(again.Result, want) || again.LLMCalls != 0 || again.Ran != 0 {
						t.Fatalf("after finish: %+v, want the stored result", again)
					}
					if readFile(t, eff) != effBefore || readFile(t, llm) != llmBefore {
						t.Fatal("a finished run called the LLM or a tool again")
					}
				})
			}
		})
	}
}

// TestRunnersFinishEachOthersRuns: a run one language's runner started
// and was killed in is finished by another's, with nothing run twice,
// for every ordered pair of languages.
func TestRunnersFinishEachOthersRuns(t *testing.T) {
	needFaults(t)
	h := newHome(t)
	s := serveHome(t, h)
	langs := runnerLangs(t)
	if len(langs) < 2 {
		t.Skip("one runner only on this machine")
	}
	const tools = 7
	dir := t.TempDir()
	var want json.RawMessage
	for _, a := range langs {
		for _, b := range langs {
			if a.name == b.name {
				continue
			}
			t.Run(a.name+"-then-"+b.name, func(t *testing.T) {
				run := a.name + "-then-" + b.name
				eff, llm := filepath.Join(dir, run+"-eff"), filepath.Join(dir, run+"-llm")
				args := []string{"--run", run, "--tools", fmt.Sprint(tools), "--effects", eff, "--llm-log", llm}
				if _, killed := runLang(t, s, a, append(args, "--crash-at", "tool_written:5")...); !killed {
					t.Fatal("not killed")
				}
				got, _ := runLang(t, s, b, args...)
				if want == nil {
					want = got.Result
				}
				if got.Stored || !sameJSON(got.Result, want) || got.Replayed == 0 {
					t.Fatalf("%s finishing %s's run: %+v, want result %s with effects replayed", b.name, a.name, got, want)
				}
				checkEffects(t, eff, tools)
				checkLLMCalls(t, llm, nil)
				again, _ := runLang(t, s, a, args...)
				if !again.Stored || !sameJSON(again.Result, want) {
					t.Fatalf("%s after %s finished: %+v, want the stored result", a.name, b.name, again)
				}
			})
		}
	}
}

// TestRunnersAwaitApproval: each runner, with --await-approval, records
// that it waits for the signal "approval" and ends its process; the run
// is listed as waiting; a signal of another name is refused; started
// again before the signal it still waits, calling neither the LLM nor a
// tool; after spl run signal it finishes with the signal's data in its
// result, and then returns the stored result.
func TestRunnersAwaitApproval(t *testing.T) {
	needFaults(t)
	h := newHome(t)
	s := serveHome(t, h)
	dir := t.TempDir()
	for _, lang := range runnerLangs(t) {
		t.Run(lang.name, func(t *testing.T) {
			run := lang.name + "-approval"
			eff, llm := filepath.Join(dir, run+"-eff"), filepath.Join(dir, run+"-llm")
			args := []string{"--run", run, "--tools", "4", "--effects", eff, "--llm-log", llm, "--await-approval"}
			for i := range 2 {
				out, _ := runLang(t, s, lang, args...)
				if out.Waiting != "approval" || string(out.Result) != "null" || (i == 1 && (out.LLMCalls != 0 || out.Ran != 0)) {
					t.Fatalf("start %d before the signal: %+v, want waiting for approval and nothing run again", i+1, out)
				}
			}
			checkEffects(t, eff, 4)
			code, body := do(t, "GET", s.http+"/v1/runs/"+run+"?thread=runner", s.readTok, "")
			if code != 200 || !strings.Contains(body, `"status":"waiting"`) || !strings.Contains(body, `"waiting_for":"approval"`) {
				t.Fatalf("run show: %d %s", code, body)
			}
			signal := func(name string) (int, string) {
				return do(t, "POST", s.http+"/v1/runs/"+run+"/signal", s.writeTok,
					`{"thread":"runner","name":"`+name+`","data":{"approved":true,"by":"ana"},"actor":"did:sync:user:ana"}`)
			}
			if code, body := signal("rejection"); code != 409 || !strings.Contains(body, `"code":"run_not_waiting"`) {
				t.Fatalf("a signal of another name: %d %s", code, body)
			}
			if code, body := signal("approval"); code != 200 {
				t.Fatalf("signal: %d %s", code, body)
			}
			got, _ := runLang(t, s, lang, args...)
			var result map[string]any
			if err := json.Unmarshal(got.Result, &result); err != nil || got.Stored || got.LLMCalls != 0 || got.Ran != 0 ||
				!reflect.DeepEqual(result["approval"], map[string]any{"approved": true, "by": "ana"}) {
				t.Fatalf("after the signal: %+v (%v), want the result with the approval, nothing run again", got, err)
			}
			again, _ := runLang(t, s, lang, args...)
			if !again.Stored || !sameJSON(again.Result, got.Result) {
				t.Fatalf("after the finish: %+v, want the stored result", again)
			}
			checkEffects(t, eff, 4)
			checkLLMCalls(t, llm, nil)
		})
	}
}
