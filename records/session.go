package records

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Kinds of a session's life on its thread, besides [KindCheckpoint].
const (
	// KindTranscript is one event of a multi-agent session's transcript:
	// a body with "agentId", optionally "childAgentId", a "type" (for a
	// delegation "delegation", with "targetAgentId") and its content.
	// Per-agent conversation tails are computed from these.
	KindTranscript = "agent.transcript"
	// KindScratchpad is an agent's scratch pad: a body with "agentId" and
	// "content" (text). The newest one of an agent on the thread is its
	// expertiseSnapshot in a pause checkpoint.
	KindScratchpad = "agent.scratchpad"
	// KindSessionMemory records changes made to a session's memory on
	// resume (a [SessionEvent] body with "set"), so the history says who
	// changed what.
	KindSessionMemory = "agent.session.memory"

	// The session status events: the kind says the status, so a read
	// model keeps a session's status from the header alone. Each body is
	// a [SessionEvent] whose "type" matches the kind.
	KindSessionPaused    = "agent.session.paused"
	KindSessionResumed   = "agent.session.resumed"
	KindSessionFailed    = "agent.session.failed"
	KindSessionCompleted = "agent.session.completed"
	KindSessionCancelled = "agent.session.cancelled"
)

// Session statuses.
const (
	StatusRunning   = "running"
	StatusPaused    = "paused"
	StatusFailed    = "failed"
	StatusCompleted = "completed"
	StatusCancelled = "cancelled"
)

// SessionStatusOf returns the status a session event of kind sets
// (resumed: running), or "" when kind is not a session event.
func SessionStatusOf(kind string) string {
	switch kind {
	case KindSessionPaused:
		return StatusPaused
	case KindSessionResumed:
		return StatusRunning
	case KindSessionFailed:
		return StatusFailed
	case KindSessionCompleted:
		return StatusCompleted
	case KindSessionCancelled:
		return StatusCancelled
	}
	return ""
}

// SessionStatus is the status of a thread's session: the one its newest
// session status event sets (lastEvent, its kind; "" when it has none),
// else running when the thread holds a checkpoint or a transcript event
// (hasWork), else "": no session. It is the one rule of the status, for
// the thread index (projections/fold) and for the service layer's reads
// of the log (sdk) alike.
func SessionStatus(lastEvent string, hasWork bool) string {
	if st := SessionStatusOf(lastEvent); st != "" {
		return st
	}
	if hasWork {
		return StatusRunning
	}
	return ""
}

// SessionEventKinds are the kinds of the session status events.
var SessionEventKinds = []string{KindSessionPaused, KindSessionResumed, KindSessionFailed, KindSessionCompleted, KindSessionCancelled}

// sessionEventType is the "type" of each session event kind.
var sessionEventType = map[string]string{
	KindSessionPaused:    "session_paused",
	KindSessionResumed:   "session_resumed",
	KindSessionFailed:    "session_failed",
	KindSessionCompleted: "session_completed",
	KindSessionCancelled: "session_cancelled",
	KindSessionMemory:    "session_memory",
}

// SessionEventType returns the "type" of a session event of kind
// ("session_paused", …), "" for other kinds.
func SessionEventType(kind string) string { return sessionEventType[kind] }

// Checkpoint types: the "type" of a checkpoint body.
const (
	CheckpointNodeStart      = "node_start"
	CheckpointNodeComplete   = "node_complete"
	CheckpointEdgeTransition = "edge_transition"
	CheckpointLoopIteration  = "loop_iteration"
	CheckpointSafePoint      = "safe_point"
	CheckpointUser           = "user_checkpoint"
)

// CheckpointTypes are the checkpoint types, in the order of a node's life.
var CheckpointTypes = []string{CheckpointNodeStart, CheckpointNodeComplete, CheckpointEdgeTransition,
	CheckpointLoopIteration, CheckpointSafePoint, CheckpointUser}

// Keys of the execution state of a checkpoint body (wire format; never
// change). They sit beside the [Checkpoint] fields, in Extra.
const (
	keyType               = "type"
	keyCurrentNode        = "current_node"
	keyNextNode           = "next_node"
	keyExecutionPath      = "execution_path"
	keySharedMemory       = "shared_memory"
	keyAccumulatedOutputs = "accumulated_outputs"
	keyMetricsSnapshot    = "metrics_snapshot"
	keyIsClean            = "is_clean"
	keyCanResumeFrom      = "can_resume_from"
	keyDescription        = "description"
	keyPause              = "pause"
)

// ExecState is the execution state a checkpoint may carry beside its
// summary: its type, where in the graph it was taken, the memory and
// outputs then, and whether it is clean and can be resumed from; a pause
// checkpoint also carries the [SessionPause]. Every field is optional: a
// checkpoint without them is untyped, clean and resumable.
type ExecState struct {
	Type               string         // "type": one of CheckpointTypes
	CurrentNode        string         // "current_node"
	NextNode           string         // "next_node"
	ExecutionPath      []string       // "execution_path"
	SharedMemory       map[string]any // "shared_memory"
	AccumulatedOutputs map[string]any // "accumulated_outputs"
	MetricsSnapshot    map[string]any // "metrics_snapshot"
	IsClean            *bool          // "is_clean"; absent: true
	CanResumeFrom      *bool          // "can_resume_from"; absent: true
	Description        string         // "description"
	Pause              *SessionPause  // "pause": the deliberation engine's checkpoint
}

// Clean reports is_clean, true when absent.
func (s *ExecState) Clean() bool { return s.IsClean == nil || *s.IsClean }

// Resumable reports can_resume_from, true when absent.
func (s *ExecState) Resumable() bool { return s.CanResumeFrom == nil || *s.CanResumeFrom }

// Put sets s's keys in extra (a Checkpoint's Extra), creating it when nil,
// and returns it.
func (s *ExecState) Put(extra map[string]any) map[string]any {
	if extra == nil {
		extra = make(map[string]any)
	}
	set := func(k string, ok bool, v any) {
		if ok {
			extra[k] = v
		}
	}
	set(keyType, s.Type != "", s.Type)
	set(keyCurrentNode, s.CurrentNode != "", s.CurrentNode)
	set(keyNextNode, s.NextNode != "", s.NextNode)
	set(keyExecutionPath, s.ExecutionPath != nil, s.ExecutionPath)
	set(keySharedMemory, s.SharedMemory != nil, s.SharedMemory)
	set(keyAccumulatedOutputs, s.AccumulatedOutputs != nil, s.AccumulatedOutputs)
	set(keyMetricsSnapshot, s.MetricsSnapshot != nil, s.MetricsSnapshot)
	if s.IsClean != nil {
		extra[keyIsClean] = *s.IsClean
	}
	if s.CanResumeFrom != nil {
		extra[keyCanResumeFrom] = *s.CanResumeFrom
	}
	set(keyDescription, s.Description != "", s.Description)
	if s.Pause != nil {
		extra[keyPause] = s.Pause.value()
	}
	return extra
}

// ExecStateOf reads the execution state of a checkpoint from its Extra
// keys, checking their schema: a failure is a *FieldError naming the key
// ("body.type", "body.pause.activeAgents[1].agentId").
func ExecStateOf(cp *Checkpoint) (*ExecState, error) {
	s := &ExecState{}
	x := cp.Extra
	var err error
	if v, ok := x[keyType]; ok {
		if s.Type, err = textValue("body."+keyType, v); err != nil {
			return nil, err
		}
		if !slices.Contains(CheckpointTypes, s.Type) {
			return nil, fieldErrorf("body.type", "must be one of %v, got %s", CheckpointTypes, quote(s.Type))
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{keyCurrentNode, &s.CurrentNode}, {keyNextNode, &s.NextNode}, {keyDescription, &s.Description}} {
		if v, ok := x[f.key]; ok {
			if *f.dst, err = textValue("body."+f.key, v); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := x[keyExecutionPath]; ok {
		if s.ExecutionPath, err = stringList("body."+keyExecutionPath, v); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *map[string]any
	}{{keySharedMemory, &s.SharedMemory}, {keyAccumulatedOutputs, &s.AccumulatedOutputs}, {keyMetricsSnapshot, &s.MetricsSnapshot}} {
		if v, ok := x[f.key]; ok {
			if *f.dst, err = textMap("body."+f.key, v); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range []struct {
		key string
		dst **bool
	}{{keyIsClean, &s.IsClean}, {keyCanResumeFrom, &s.CanResumeFrom}} {
		if v, ok := x[f.key]; ok {
			b, ok := v.(bool)
			if !ok {
				return nil, fieldErrorf("body."+f.key, "must be a boolean, got %s", goCBORType(v))
			}
			*f.dst = &b
		}
	}
	if v, ok := x[keyPause]; ok {
		if s.Pause, err = pauseOf("body."+keyPause, v); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SessionPause is the deliberation engine's session checkpoint, with its
// field names: what a pause captured, for a resume to rebuild its agents.
type SessionPause struct {
	SessionID             string            // "sessionId": non-empty
	ConstraintState       ConstraintState   // "constraintState"
	ActiveAgents          []AgentCheckpoint // "activeAgents"
	RoundsCompleted       uint64            // "roundsCompleted"
	PendingDelegations    []any             // "pendingDelegations": delegations in flight
	TranscriptReplayDepth uint64            // "transcriptReplayDepth": at least 1
	CreatedAt             time.Time         // "createdAt": ISO 8601 text, UTC, milliseconds
}

// ConstraintState is what a session had used of its limits at a pause.
type ConstraintState struct {
	BudgetSpent     float64 // "budgetSpent": not negative
	RoundsCompleted uint64  // "roundsCompleted"
	TimeElapsedMs   uint64  // "timeElapsedMs"
}

// AgentCheckpoint is one agent of a [SessionPause].
type AgentCheckpoint struct {
	AgentID           string           // "agentId": non-empty
	ParentAgentID     string           // "parentAgentId": absent when empty
	Depth             uint64           // "depth": 0 for a top-level agent
	ConversationTail  []map[string]any // "conversationTail": transcript event bodies, oldest first
	ExpertiseSnapshot string           // "expertiseSnapshot": the scratch pad; absent when empty
}

// ISOLayout is the layout of createdAt: ISO 8601 in UTC with milliseconds.
const ISOLayout = "2006-01-02T15:04:05.000Z07:00"

// value is p as generic values, as it is encoded.
func (p *SessionPause) value() map[string]any {
	agents := make([]any, len(p.ActiveAgents))
	for i, a := range p.ActiveAgents {
		tail := make([]any, len(a.ConversationTail))
		for j, e := range a.ConversationTail {
			tail[j] = e
		}
		m := map[string]any{"agentId": a.AgentID, "depth": a.Depth, "conversationTail": tail}
		if a.ParentAgentID != "" {
			m["parentAgentId"] = a.ParentAgentID
		}
		if a.ExpertiseSnapshot != "" {
			m["expertiseSnapshot"] = a.ExpertiseSnapshot
		}
		agents[i] = m
	}
	pending := p.PendingDelegations
	if pending == nil {
		pending = []any{}
	}
	return map[string]any{
		"sessionId": p.SessionID,
		"constraintState": map[string]any{
			"budgetSpent":     p.ConstraintState.BudgetSpent,
			"roundsCompleted": p.ConstraintState.RoundsCompleted,
			"timeElapsedMs":   p.ConstraintState.TimeElapsedMs,
		},
		"activeAgents":          agents,
		"roundsCompleted":       p.RoundsCompleted,
		"pendingDelegations":    pending,
		"transcriptReplayDepth": p.TranscriptReplayDepth,
		"createdAt":             p.CreatedAt.UTC().Format(ISOLayout),
	}
}

// pauseOf reads a SessionPause from generic value v at field.
func pauseOf(field string, v any) (*SessionPause, error) {
	m, err := textMap(field, v)
	if err != nil {
		return nil, err
	}
	p := &SessionPause{}
	if p.SessionID, err = textValue(field+".sessionId", m["sessionId"]); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, fieldErrorf(field+".sessionId", "must not be empty")
	}
	cs, err := textMap(field+".constraintState", m["constraintState"])
	if err != nil {
		return nil, err
	}
	if p.ConstraintState.BudgetSpent, err = number(field+".constraintState.budgetSpent", cs["budgetSpent"]); err != nil {
		return nil, err
	}
	if p.ConstraintState.RoundsCompleted, err = unsigned(field+".constraintState.roundsCompleted", cs["roundsCompleted"]); err != nil {
		return nil, err
	}
	if p.ConstraintState.TimeElapsedMs, err = unsigned(field+".constraintState.timeElapsedMs", cs["timeElapsedMs"]); err != nil {
		return nil, err
	}
	agents, ok := m["activeAgents"].([]any)
	if !ok {
		return nil, fieldErrorf(field+".activeAgents", "must be an array, got %s", goCBORType(m["activeAgents"]))
	}
	for i, av := range agents {
		af := fmt.Sprintf("%s.activeAgents[%d]", field, i)
		am, err := textMap(af, av)
		if err != nil {
			return nil, err
		}
		var a AgentCheckpoint
		if a.AgentID, err = textValue(af+".agentId", am["agentId"]); err != nil {
			return nil, err
		}
		if a.AgentID == "" {
			return nil, fieldErrorf(af+".agentId", "must not be empty")
		}
		if v, ok := am["parentAgentId"]; ok {
			if a.ParentAgentID, err = textValue(af+".parentAgentId", v); err != nil {
				return nil, err
			}
		}
		if a.Depth, err = unsigned(af+".depth", am["depth"]); err != nil {
			return nil, err
		}
		if v, ok := am["expertiseSnapshot"]; ok {
			if a.ExpertiseSnapshot, err = textValue(af+".expertiseSnapshot", v); err != nil {
				return nil, err
			}
		}
		tail, ok := am["conversationTail"].([]any)
		if !ok {
			return nil, fieldErrorf(af+".conversationTail", "must be an array, got %s", goCBORType(am["conversationTail"]))
		}
		a.ConversationTail = make([]map[string]any, len(tail))
		for j, ev := range tail {
			if a.ConversationTail[j], err = textMap(fmt.Sprintf("%s.conversationTail[%d]", af, j), ev); err != nil {
				return nil, err
			}
		}
		p.ActiveAgents = append(p.ActiveAgents, a)
	}
	if p.RoundsCompleted, err = unsigned(field+".roundsCompleted", m["roundsCompleted"]); err != nil {
		return nil, err
	}
	if p.PendingDelegations, ok = m["pendingDelegations"].([]any); !ok {
		return nil, fieldErrorf(field+".pendingDelegations", "must be an array, got %s", goCBORType(m["pendingDelegations"]))
	}
	if p.TranscriptReplayDepth, err = unsigned(field+".transcriptReplayDepth", m["transcriptReplayDepth"]); err != nil {
		return nil, err
	}
	if p.TranscriptReplayDepth < 1 {
		return nil, fieldErrorf(field+".transcriptReplayDepth", "must be at least 1, got 0")
	}
	at, err := textValue(field+".createdAt", m["createdAt"])
	if err != nil {
		return nil, err
	}
	if p.CreatedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return nil, fieldErrorf(field+".createdAt", "must be an ISO 8601 time (%s), got %s", ISOLayout, quote(at))
	}
	return p, nil
}

// SessionEvent is the body of a session status event (kinds
// agent.session.paused, resumed, failed, completed, cancelled) and of
// [KindSessionMemory]. Every key but "type" is optional.
type SessionEvent struct {
	Type       string         // "type": "session_paused", … as the kind says
	Checkpoint string         // "checkpoint": id of the checkpoint paused at or resumed from
	Error      string         // "error": why a session failed
	Node       string         // "node": the node it failed at
	Reason     string         // "reason": free text
	Set        map[string]any // "set": memory modifications (KindSessionMemory)
	// "constraintState" of a resumed session: the rules applied (time
	// elapsed reset to 0, budget and rounds carried).
	ConstraintState *ConstraintState
}

// Body returns e as a body for kind, "type" set from the kind.
func (e SessionEvent) Body(kind string) map[string]any {
	m := map[string]any{keyType: sessionEventType[kind]}
	for k, v := range map[string]string{"checkpoint": e.Checkpoint, "error": e.Error, "node": e.Node, "reason": e.Reason} {
		if v != "" {
			m[k] = v
		}
	}
	if e.Set != nil {
		m["set"] = e.Set
	}
	if cs := e.ConstraintState; cs != nil {
		m["constraintState"] = map[string]any{
			"budgetSpent": cs.BudgetSpent, "roundsCompleted": cs.RoundsCompleted, "timeElapsedMs": cs.TimeElapsedMs,
		}
	}
	return m
}

// DecodeSessionEvent strictly decodes the body of a session event of
// kind and checks its schema: "type" as the kind says, "checkpoint" a
// content id, the other keys' types. Keys it does not know are allowed.
func DecodeSessionEvent(kind string, body []byte) (*SessionEvent, error) {
	m, err := decodeBodyMap(body)
	if err != nil {
		return nil, fmt.Errorf("decode session event: %w", err)
	}
	e := &SessionEvent{}
	if e.Type, err = textValue("body.type", m[keyType]); err != nil {
		return nil, err
	}
	if want := sessionEventType[kind]; e.Type != want {
		return nil, fieldErrorf("body.type", "must be %q for kind %s, got %s", want, kind, quote(e.Type))
	}
	for k, dst := range map[string]*string{"checkpoint": &e.Checkpoint, "error": &e.Error, "node": &e.Node, "reason": &e.Reason} {
		if v, ok := m[k]; ok {
			if *dst, err = textValue("body."+k, v); err != nil {
				return nil, err
			}
		}
	}
	if e.Checkpoint != "" {
		if _, err := ParseID(e.Checkpoint); err != nil {
			return nil, fieldErrorf("body.checkpoint", "must be a record id: %v", err)
		}
	}
	if v, ok := m["set"]; ok {
		if e.Set, err = textMap("body.set", v); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Validate implements the schema check of validBody (DecodeSessionEvent
// checked it all).
func (e *SessionEvent) Validate() error { return nil }

// textValue returns v as text, or a *FieldError on field.
func textValue(field string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fieldErrorf(field, "must be a text string, got %s", goCBORType(v))
	}
	return s, nil
}

// textMap returns generic map v with text keys as a map[string]any (the
// values as they are), or a *FieldError on field.
func textMap(field string, v any) (map[string]any, error) {
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			s, ok := k.(string)
			if !ok {
				return nil, fieldErrorf(field, "keys must be text strings, got a %s key", goCBORType(k))
			}
			out[s] = e
		}
		return out, nil
	}
	return nil, fieldErrorf(field, "must be a map, got %s", goCBORType(v))
}

// unsigned returns v as an unsigned integer, or a *FieldError on field.
func unsigned(field string, v any) (uint64, error) {
	switch n := v.(type) {
	case uint64:
		return n, nil
	case int:
		if n >= 0 {
			return uint64(n), nil
		}
	}
	return 0, fieldErrorf(field, "must be an unsigned integer, got %s", goCBORType(v))
}

// number returns v as a finite number that is not negative, or a
// *FieldError on field.
func number(field string, v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case uint64:
		f = float64(n)
	case float64:
		f = n
	case float32:
		f = float64(n)
	default:
		return 0, fieldErrorf(field, "must be a number, got %s", goCBORType(v))
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fieldErrorf(field, "must be a finite number, not negative, got %v", f)
	}
	return f, nil
}

// JSONValue converts a generic decoded CBOR value (a body's, an Extra's)
// to one encoding/json writes, as [BodyToJSON] does.
// Maps with text keys (map[string]any) are taken as generic maps.
func JSONValue(v any) (any, error) { return toJSON("body", generic(v)) }

// generic turns the Go forms a caller builds (map[string]any,
// []map[string]any, []string, int) into the generic decoded forms.
func generic(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[any]any, len(v))
		for k, e := range v {
			m[k] = generic(e)
		}
		return m
	case map[any]any:
		m := make(map[any]any, len(v))
		for k, e := range v {
			m[k] = generic(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = generic(e)
		}
		return a
	case []map[string]any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = generic(e)
		}
		return a
	case []string:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = e
		}
		return a
	case int:
		if v < 0 {
			return int64(v)
		}
		return uint64(v)
	case float32:
		return float64(v)
	}
	return v
}
