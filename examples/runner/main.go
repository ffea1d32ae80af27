// Command runner is an agent runner on spl's durable runs, with a scripted
// fake LLM and one tool: append_line, whose only side effect is to append
// one line to the file named by --effects.
//
//	SPL_HOME=/tmp/spl go run ./examples/runner --run R --tools N --effects FILE
//
// Killed at any moment (SIGKILL) and started again with the same run id,
// it resumes from its newest checkpoint: tool calls whose results are
// recorded are replayed, not run again, and it finishes with exactly one
// line per tool call in FILE and the same result. Started once more after
// it finished, it prints the stored result and calls neither the LLM nor
// any tool.
//
// Exactly one line per call across a kill between a tool's side effect
// and its record needs the tool itself to be idempotent: spl promises at
// least once for the tool and exactly once for the recorded result. So
// append_line writes its line keyed by the call id and skips a call id
// already in the file; that is the tool's own idempotency, not spl's.
//
// --crash-at NAME:N kills the process with SIGKILL the N-th time it
// reaches the point NAME, so that tests kill it at chosen places: any
// phase (run_started, step_started, pre_llm, llm, post_llm,
// pre_tool_batch, post_tool_batch), tool (inside fn before its side
// effect), tool_written (after the side effect, before its record),
// effect (after the record landed) and finish (before run_terminal).
// --llm-log FILE appends a line per LLM call.
//
// --await-approval makes the run wait, after its last step, for the
// signal "approval" (spl run signal RUN approval --data JSON): the runner
// records that it waits, prints {"waiting_for": "approval", …} and exits
// 0; started again after the signal, it finishes with the signal's data
// as the result's "approval".
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spl-dev/spl/sdk"
)

// callsPerStep is how many tool calls the scripted LLM asks for at once.
const callsPerStep = 3

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	CallID  string `json:"call_id,omitempty"`
}

type toolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

type llmResponse struct {
	Text      string     `json:"text"`
	ToolCalls []toolCall `json:"tool_calls"`
	Finish    string     `json:"finish_reason"`
}

type usage struct {
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
	Total  int64 `json:"total_tokens"`
}

// snapshot is the runtime snapshot, in the runner's field names.
type snapshot struct {
	Messages  []message    `json:"messages"`
	Step      int          `json:"step"`
	State     string       `json:"state"`
	LLMCalls  int          `json:"llm_calls"`
	ToolCalls int          `json:"tool_calls"`
	StartedAt float64      `json:"started_at_s"`
	Usage     usage        `json:"usage"`
	Cost      float64      `json:"total_cost_usd"`
	Pending   *llmResponse `json:"pending_llm_response"`
	Requested string       `json:"requested_model"`
	Provider  string       `json:"provider_adapter"`
	FinalText string       `json:"final_text"`
}

type crasher struct {
	name string
	n    int
	seen map[string]int
}

func (c *crasher) at(point string) {
	c.seen[point]++
	if point == c.name && c.seen[point] == c.n {
		fmt.Fprintf(os.Stderr, "runner: crashing at %s:%d\n", point, c.n)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
}

func main() {
	var (
		runID, thread, effects, crashAt, llmLog string
		tools                                   int
		approval                                bool
	)
	flag.StringVar(&runID, "run", "", "run id")
	flag.StringVar(&thread, "thread", "runner", "thread of the run")
	flag.IntVar(&tools, "tools", 5, "tool calls the scripted LLM asks for in all")
	flag.StringVar(&effects, "effects", "", "file the tool appends its lines to")
	flag.StringVar(&crashAt, "crash-at", "", "SIGKILL this process the N-th time it reaches point NAME (NAME:N)")
	flag.StringVar(&llmLog, "llm-log", "", "file to append a line to per LLM call")
	flag.BoolVar(&approval, "await-approval", false, `wait for the signal "approval" before finishing`)
	flag.Parse()
	if runID == "" || effects == "" {
		fmt.Fprintln(os.Stderr, "runner: --run and --effects are required")
		os.Exit(2)
	}
	cr := &crasher{seen: map[string]int{}}
	if crashAt != "" {
		name, n, _ := strings.Cut(crashAt, ":")
		cr.name, cr.n = name, 1
		if v, err := strconv.Atoi(n); err == nil {
			cr.n = v
		}
	}
	if err := run(context.Background(), runID, thread, tools, effects, llmLog, approval, cr); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

// output is what the runner prints: the run's result and how it got it.
type output struct {
	Result      json.RawMessage `json:"result"`
	Stored      bool            `json:"stored"` // the stored result of a finished run
	Replayed    int             `json:"replayed_effects"`
	Ran         int             `json:"ran_effects"`
	LLMCalls    int             `json:"llm_calls_this_process"`
	Coalesced   int             `json:"coalesced"`
	ResumedFrom string          `json:"resumed_from,omitempty"`
	WaitingFor  string          `json:"waiting_for,omitempty"` // the signal the run waits for, its process ending
}

func run(ctx context.Context, runID, thread string, tools int, effects, llmLog string, approval bool, cr *crasher) error {
	c, err := sdk.Open(ctx, sdk.WithActor("did:sync:agent:runner"))
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.OpenRun(ctx, thread, runID)
	if err != nil {
		return err
	}
	res := r.Resume()
	if res.Status == sdk.RunTerminal {
		j, err := res.Terminal.JSON()
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(output{Result: j, Stored: true})
	}
	out := output{}
	s := snapshot{State: "running", StartedAt: float64(time.Now().UnixMilli()) / 1000, Requested: "scripted-1", Provider: "fake"}
	if res.Snapshot != nil {
		if err := res.Snapshot.Payload.Decode(&s); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		out.ResumedFrom = res.Snapshot.Phase
	}
	cp := func(phase string, payload any) {
		if err := r.Checkpoint(ctx, phase, payload); err != nil {
			fmt.Fprintln(os.Stderr, "runner: checkpoint:", err)
		}
		cr.at(phase)
	}
	cp(sdk.PhaseRunStarted, map[string]any{"agent_name": "example", "resumed": res.Resumed})
	// A step_started snapshot is a step begun whose LLM call is not known
	// to have been made: that step is made again, not the next one.
	again := res.Snapshot != nil && res.Snapshot.Phase == sdk.PhaseStepStarted
	for {
		if s.Pending == nil {
			if !again {
				s.Step++
				cp(sdk.PhaseStepStarted, s)
			}
			again = false
			cp(sdk.PhasePreLLM, map[string]any{"model": s.Requested, "provider": s.Provider, "message_count": len(s.Messages)})
			resp := scriptedLLM(s.Step, tools)
			out.LLMCalls++
			if llmLog != "" {
				if err := appendLine(llmLog, fmt.Sprintf("%s step %d", runID, s.Step)); err != nil {
					return err
				}
			}
			cr.at("llm")
			s.LLMCalls++
			s.Usage.Input += 100
			s.Usage.Output += 20
			s.Usage.Total += 120
			s.Cost += 0.0012
			s.Pending = &resp
			s.Messages = append(s.Messages, message{Role: "assistant", Content: resp.Text})
			cp(sdk.PhasePostLLM, s)
		}
		resp := s.Pending
		if len(resp.ToolCalls) == 0 {
			s.FinalText = resp.Text
			break
		}
		cp(sdk.PhasePreToolBatch, map[string]any{"tool_call_count": len(resp.ToolCalls)})
		for _, tc := range resp.ToolCalls {
			er, err := r.Effect(ctx, tc.ID, tc.Name, json.RawMessage(tc.Args), func(context.Context) (json.RawMessage, error) {
				cr.at("tool")
				line, err := appendLineOnce(effects, tc.ID, tc.Args)
				if err != nil {
					return nil, err
				}
				cr.at("tool_written")
				return json.Marshal(map[string]string{"line": line})
			})
			if err != nil {
				return err
			}
			cr.at("effect")
			s.ToolCalls++
			s.Messages = append(s.Messages, message{Role: "tool", CallID: tc.ID, Content: string(er.Output)})
		}
		s.Pending = nil
		cp(sdk.PhasePostToolBatch, map[string]any{"tool_calls_total": s.ToolCalls, "tool_failures": 0})
	}
	result := map[string]any{"final_text": s.FinalText, "tool_calls": s.ToolCalls, "steps": s.Step, "messages": len(s.Messages)}
	if approval {
		sig, err := r.AwaitSignal(ctx, "approval", map[string]any{"question": "finish run " + runID + "?"}, 0)
		if errors.Is(err, sdk.ErrStillWaiting) {
			if err := r.Close(); err != nil {
				return err
			}
			st := r.Stats()
			out.Result, out.WaitingFor, out.Replayed, out.Ran, out.Coalesced = json.RawMessage("null"), "approval", st.Replayed, st.Ran, st.Coalesced
			return json.NewEncoder(os.Stdout).Encode(out)
		}
		if err != nil {
			return err
		}
		var data any
		if !sig.Data.IsZero() {
			if err := sig.Data.Decode(&data); err != nil {
				return err
			}
		}
		result["approval"] = data
	}
	cr.at("finish")
	rep, err := r.Finish(ctx, sdk.Terminal{Result: result, Payload: map[string]any{
		"final_text": s.FinalText, "requested_model": s.Requested, "normalized_model": s.Requested, "provider_adapter": s.Provider,
	}})
	if err != nil {
		return err
	}
	j, err := json.Marshal(result)
	if err != nil {
		return err
	}
	out.Result, out.Replayed, out.Ran, out.Coalesced = j, rep.Replayed, rep.Ran, rep.Coalesced
	return json.NewEncoder(os.Stdout).Encode(out)
}

// scriptedLLM answers step (1, 2, …) of a run that makes tools tool calls
// in all: callsPerStep calls a step, then a final text.
func scriptedLLM(step, tools int) llmResponse {
	first := (step - 1) * callsPerStep
	if first >= tools {
		return llmResponse{Text: fmt.Sprintf("done: %d tool calls", tools), Finish: "stop"}
	}
	var calls []toolCall
	for i := first; i < tools && i < first+callsPerStep; i++ {
		calls = append(calls, toolCall{ID: fmt.Sprintf("call-%d", i), Name: "append_line", Args: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return llmResponse{Text: fmt.Sprintf("step %d: calling %d tools", step, len(calls)), ToolCalls: calls, Finish: "tool_calls"}
}

// appendLineOnce appends "<callID> <args>" to path unless a line for
// callID is there already: the tool's own idempotency by call id.
func appendLineOnce(path, callID, args string) (string, error) {
	line := callID + " " + args
	f, err := os.Open(path)
	if err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), callID+" ") {
				f.Close()
				return sc.Text(), nil
			}
		}
		f.Close()
	}
	return line, appendLine(path, line)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
