package wire

import (
	"fmt"
	"time"

	"github.com/spl-dev/spl/records"
)

// Session is the JSON form of a session in a listing ("spl session list
// --status", GET /v1/sessions): its status, the error and node of a
// failure, its last checkpoint, and its first and newest activity.
type Session struct {
	SessionID      string  `json:"session_id"` // the thread
	Status         string  `json:"status"`     // running, paused, failed, completed, cancelled
	Error          *string `json:"error"`      // null unless failed
	FailedAtNode   *string `json:"failed_at_node"`
	LastCheckpoint *string `json:"last_checkpoint"` // id; null when none
	CreatedAt      string  `json:"created_at"`      // UTC, in TimeLayout
	UpdatedAt      string  `json:"updated_at"`
	// Resumable says whether the session is one to resume, by the
	// service layer's rule (rules.Resumable, as sdk.SessionInfo carries
	// it): faces offer Resume by it, and decide nothing themselves.
	Resumable bool `json:"resumable"`
}

// Sessions is a page of sessions and how many it holds.
type Sessions struct {
	Sessions []Session `json:"sessions"`
	Total    int       `json:"total"`
}

// NewSession fills a Session.
func NewSession(thread, status, errText, node string, last records.ID, created, updated time.Time, resumable bool) Session {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return Session{
		SessionID: thread, Status: status, Error: opt(errText), FailedAtNode: opt(node),
		LastCheckpoint: OptionalID(last), CreatedAt: FormatTime(created), UpdatedAt: FormatTime(updated),
		Resumable: resumable,
	}
}

// SessionCheckpoint is the JSON form of a checkpoint with its execution
// state: the checkpoint, its type and nodes, memory, clean and
// resumable, and for a pause checkpoint the deliberation engine's fields
// under "pause".
type SessionCheckpoint struct {
	Checkpoint
	Type               string        `json:"type"` // "" when untyped
	CurrentNode        string        `json:"current_node"`
	NextNode           string        `json:"next_node"`
	ExecutionPath      []string      `json:"execution_path"`
	SharedMemory       any           `json:"shared_memory"`
	AccumulatedOutputs any           `json:"accumulated_outputs"`
	MetricsSnapshot    any           `json:"metrics_snapshot"`
	IsClean            bool          `json:"is_clean"`
	CanResumeFrom      bool          `json:"can_resume_from"`
	Description        string        `json:"description"`
	Pause              *SessionPause `json:"pause,omitempty"`
	Redacted           []string      `json:"redacted,omitempty"`
}

// NewSessionCheckpoint returns the JSON form of checkpoint r (decoded as
// cp, its state st).
func NewSessionCheckpoint(id records.ID, clock uint64, r *records.Record, cp *records.Checkpoint, st *records.ExecState) (SessionCheckpoint, error) {
	c, err := NewCheckpoint(id, clock, r, cp)
	if err != nil {
		return SessionCheckpoint{}, err
	}
	j := SessionCheckpoint{
		Checkpoint: c, Type: st.Type, CurrentNode: st.CurrentNode, NextNode: st.NextNode,
		ExecutionPath: nonNil(st.ExecutionPath), IsClean: st.Clean(), CanResumeFrom: st.Resumable(), Description: st.Description,
	}
	for _, f := range []struct {
		dst *any
		v   map[string]any
	}{{&j.SharedMemory, st.SharedMemory}, {&j.AccumulatedOutputs, st.AccumulatedOutputs}, {&j.MetricsSnapshot, st.MetricsSnapshot}} {
		if f.v == nil {
			*f.dst = map[string]any{}
			continue
		}
		if *f.dst, err = records.JSONValue(f.v); err != nil {
			return SessionCheckpoint{}, fmt.Errorf("checkpoint %s: %w", id, err)
		}
	}
	if st.Pause != nil {
		p, err := NewSessionPause(st.Pause)
		if err != nil {
			return SessionCheckpoint{}, fmt.Errorf("checkpoint %s: %w", id, err)
		}
		j.Pause = &p
	}
	if red, ok := cp.Extra[records.RedactedKey].([]any); ok {
		for _, v := range red {
			if s, ok := v.(string); ok {
				j.Redacted = append(j.Redacted, s)
			}
		}
	}
	return j, nil
}

// SessionPause is the JSON form of the deliberation engine's session
// checkpoint, with its field names.
type SessionPause struct {
	SessionID             string            `json:"sessionId"`
	ConstraintState       ConstraintState   `json:"constraintState"`
	ActiveAgents          []AgentCheckpoint `json:"activeAgents"`
	RoundsCompleted       uint64            `json:"roundsCompleted"`
	PendingDelegations    []any             `json:"pendingDelegations"`
	TranscriptReplayDepth uint64            `json:"transcriptReplayDepth"`
	CreatedAt             string            `json:"createdAt"` // ISO 8601, UTC, milliseconds
}

// ConstraintState is the JSON form of records.ConstraintState.
type ConstraintState struct {
	BudgetSpent     float64 `json:"budgetSpent"`
	RoundsCompleted uint64  `json:"roundsCompleted"`
	TimeElapsedMs   uint64  `json:"timeElapsedMs"`
}

// AgentCheckpoint is the JSON form of records.AgentCheckpoint.
type AgentCheckpoint struct {
	AgentID           string `json:"agentId"`
	ParentAgentID     string `json:"parentAgentId,omitempty"`
	Depth             uint64 `json:"depth"`
	ConversationTail  []any  `json:"conversationTail"`
	ExpertiseSnapshot string `json:"expertiseSnapshot,omitempty"`
}

// NewConstraintState is the JSON form of cs.
func NewConstraintState(cs records.ConstraintState) ConstraintState {
	return ConstraintState{BudgetSpent: cs.BudgetSpent, RoundsCompleted: cs.RoundsCompleted, TimeElapsedMs: cs.TimeElapsedMs}
}

// NewAgentCheckpoint is the JSON form of a.
func NewAgentCheckpoint(a records.AgentCheckpoint) (AgentCheckpoint, error) {
	j := AgentCheckpoint{AgentID: a.AgentID, ParentAgentID: a.ParentAgentID, Depth: a.Depth,
		ConversationTail: make([]any, len(a.ConversationTail)), ExpertiseSnapshot: a.ExpertiseSnapshot}
	for i, ev := range a.ConversationTail {
		v, err := records.JSONValue(ev)
		if err != nil {
			return AgentCheckpoint{}, fmt.Errorf("agent %s: event %d: %w", a.AgentID, i, err)
		}
		j.ConversationTail[i] = v
	}
	return j, nil
}

// NewSessionPause is the JSON form of p.
func NewSessionPause(p *records.SessionPause) (SessionPause, error) {
	j := SessionPause{
		SessionID: p.SessionID, ConstraintState: NewConstraintState(p.ConstraintState),
		ActiveAgents: []AgentCheckpoint{}, RoundsCompleted: p.RoundsCompleted, PendingDelegations: []any{},
		TranscriptReplayDepth: p.TranscriptReplayDepth, CreatedAt: p.CreatedAt.UTC().Format(records.ISOLayout),
	}
	for _, a := range p.ActiveAgents {
		ac, err := NewAgentCheckpoint(a)
		if err != nil {
			return SessionPause{}, err
		}
		j.ActiveAgents = append(j.ActiveAgents, ac)
	}
	for _, d := range p.PendingDelegations {
		v, err := records.JSONValue(d)
		if err != nil {
			return SessionPause{}, fmt.Errorf("pending delegation: %w", err)
		}
		j.PendingDelegations = append(j.PendingDelegations, v)
	}
	return j, nil
}

// Paused is the JSON form of a pause: where its checkpoint and event
// landed, and the checkpoint's deliberation fields.
type Paused struct {
	SessionPause
	Checkpoint string `json:"checkpoint"` // id of the pause checkpoint
	Clock      uint64 `json:"clock"`      // its clock
	Event      string `json:"event"`      // id of the agent.session.paused record
}

// ResumedAgent is an agent of a resume: its checkpoint and its prompt.
type ResumedAgent struct {
	AgentCheckpoint
	Prompt string `json:"prompt"`
}

// Resume is the JSON form of a resume context.
type Resume struct {
	SessionID       string          `json:"sessionId"`
	ResumedFrom     string          `json:"resumed_from"` // the checkpoint's id
	ResumedFromType string          `json:"resumed_from_type"`
	WasStatus       string          `json:"was_status"`
	Status          string          `json:"status"` // running
	ConstraintState ConstraintState `json:"constraintState"`
	RoundsCompleted uint64          `json:"roundsCompleted"`
	Memory          any             `json:"memory"`
	Redacted        []string        `json:"redacted"`    // --set keys kept off the log
	MemoryEdit      *string         `json:"memory_edit"` // id of the agent.session.memory record; null: none
	Agents          []ResumedAgent  `json:"activeAgents"`
	Event           string          `json:"event"` // id of the agent.session.resumed record
	// Skipped are the clocks of checkpoints that do not verify, passed
	// over; absent when none.
	Skipped []uint64 `json:"skipped,omitempty"`
	// Checkpoint is the checkpoint resumed from, in full: its summary,
	// learnings, next steps and state, and where in the graph it was
	// taken, with the outputs and metrics then.
	Checkpoint SessionCheckpoint `json:"checkpoint"`
	// ResumeAt is the node the session continues at: the checkpoint's
	// next_node, else its current_node ("" when it names neither).
	ResumeAt string `json:"resume_at"`
}
