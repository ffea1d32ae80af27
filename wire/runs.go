package wire

import "encoding/json"

// Run is the JSON form of a run and where it stands: an element of the
// list "spl run list --json" prints and GET /v1/runs answers.
type Run struct {
	Thread      string  `json:"thread"`
	RunID       string  `json:"run_id"`
	Status      string  `json:"status"`     // running, terminal, failed or cancelled
	Phase       string  `json:"phase"`      // of the newest checkpoint; "" when it cannot be read
	Updated     string  `json:"updated"`    // the newest checkpoint's timestamp_ms, UTC, in TimeLayout
	UpdatedTS   int64   `json:"updated_ts"` // the same in Unix milliseconds
	LatestID    *string `json:"latest_id"`  // the newest checkpoint; null when it cannot be read
	LatestClock uint64  `json:"latest_clock"`
	Problem     string  `json:"problem,omitempty"`     // why the newest checkpoint cannot be read
	WaitingFor  string  `json:"waiting_for,omitempty"` // status waiting: the signal the run waits for
	Cancellable bool    `json:"cancellable"`           // it may be cancelled now (running or waiting)
}

// RunPhase is one phase checkpoint of a run, in a RunDetail.
type RunPhase struct {
	Phase string  `json:"phase"`
	Kind  string  `json:"kind"` // agent.run.checkpoint, or agent.run.snapshot for a runtime snapshot
	ID    string  `json:"id"`
	Clock uint64  `json:"clock"`
	Time  string  `json:"time"` // timestamp_ms, UTC, in TimeLayout
	TS    int64   `json:"ts"`
	Blob  *string `json:"blob"` // digest of the payload stored beside the log; null when inline
}

// RunEffect is one recorded tool effect of a run, in a RunDetail.
type RunEffect struct {
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	InputHash  string `json:"input_hash"`
	OutputHash string `json:"output_hash"`
	ID         string `json:"id"`
	Clock      uint64 `json:"clock"`
	Time       string `json:"time"`
	TS         int64  `json:"ts"`
	// Output is the effect's output as recorded (redacted before it was
	// stored), when asked for (spl run show --outputs, ?outputs=true).
	Output json.RawMessage `json:"output,omitempty"`
}

// RunSnapshot is what the newest runtime snapshot of a run says.
type RunSnapshot struct {
	Phase        string           `json:"phase"`
	Clock        uint64           `json:"clock"`
	Step         int64            `json:"step"`
	Messages     int              `json:"messages"`
	LLMCalls     int64            `json:"llm_calls"`
	ToolCalls    int64            `json:"tool_calls"`
	Usage        map[string]int64 `json:"usage"` // {} when none
	TotalCostUSD float64          `json:"total_cost_usd"`
	Pending      bool             `json:"pending_llm_response"` // holds an LLM response whose tool calls are not all done
}

// RunDetail is the JSON form of "spl run show --json" and GET
// /v1/runs/{run}.
type RunDetail struct {
	Run
	Phases         []RunPhase      `json:"phases"`                // in clock order; [] when none
	Effects        []RunEffect     `json:"effects"`               // in clock order; [] when none
	EffectCalls    int             `json:"effect_calls"`          // distinct call ids recorded
	Replayed       int             `json:"replayed_effect_count"` // as the newest checkpoint that counts it says
	Snapshot       *RunSnapshot    `json:"snapshot"`              // null when none
	TerminalResult json.RawMessage `json:"terminal_result"`       // null unless the run finished with one
}

// RunCheckpointState is a checkpoint of a run with its payload, in a
// RunState.
type RunCheckpointState struct {
	Phase   string          `json:"phase"`
	Kind    string          `json:"kind"`
	ID      string          `json:"id"`
	Clock   uint64          `json:"clock"`
	Time    string          `json:"time"`
	TS      int64           `json:"ts"`
	Payload json.RawMessage `json:"payload"`
}

// RunCancel is a run's cancel request.
type RunCancel struct {
	Reason  string `json:"reason"`
	Actor   string `json:"actor"`
	Request string `json:"request"` // the id of the agent.run.cancel record
	Clock   uint64 `json:"clock"`
}

// RunState is what a runner in another process needs to continue a run
// (POST /v1/runs/{run}/open).
type RunState struct {
	RunID              string              `json:"run_id"`
	Thread             string              `json:"thread"`
	Status             string              `json:"status"`  // running, terminal, failed or cancelled
	Resumed            bool                `json:"resumed"` // the run had checkpoints
	Latest             *RunCheckpointState `json:"latest"`
	Snapshot           *RunCheckpointState `json:"snapshot"` // the newest runtime snapshot
	TerminalResult     json.RawMessage     `json:"terminal_result"`
	PendingLLMResponse json.RawMessage     `json:"pending_llm_response"`
	Effects            []RunEffect         `json:"effects"` // recorded, the newest per call id, in clock order
	Cancel             *RunCancel          `json:"cancel"`
	WaitingFor         string              `json:"waiting_for,omitempty"` // status waiting: the signal awaited
	Signal             *RunSignal          `json:"signal"`                // the signal awaited, come: continue with its data
	Signals            []RunSignal         `json:"signals"`               // every signal sent to the run, in clock order
}

// RunSignal is a signal sent to a run.
type RunSignal struct {
	Name    string          `json:"name"`
	Data    json.RawMessage `json:"data"`
	Actor   string          `json:"actor"`
	Request string          `json:"request"` // the id of the agent.run.signal record
	Clock   uint64          `json:"clock"`
}
