package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// Session statuses (SessionInfo.Status).
const (
	StatusRunning   = records.StatusRunning
	StatusPaused    = records.StatusPaused
	StatusFailed    = records.StatusFailed
	StatusCompleted = records.StatusCompleted
	StatusCancelled = records.StatusCancelled
)

// DefaultReplayDepth is how many transcript events of each agent a pause
// keeps when PauseOptions.Depth is 0.
const DefaultReplayDepth = 50

// Refusals of the session calls, for errors.Is.
var (
	// ErrSessionCompleted refuses to pause or resume a completed session.
	ErrSessionCompleted = errors.New("spl/sdk: session completed: it cannot be paused or resumed")
	// ErrNotResumable refuses to resume from a checkpoint whose
	// can_resume_from is false; the error says the checkpoint and why.
	ErrNotResumable = errors.New("spl/sdk: checkpoint cannot be resumed from")
	// ErrNoResumePoint refuses to resume a session that has no checkpoint
	// to resume from (a failed one: none clean and resumable).
	ErrNoResumePoint = errors.New("spl/sdk: no checkpoint to resume from")
	// ErrNotSession reports a thread that holds no session: no checkpoint,
	// transcript event or session status event.
	ErrNotSession = errors.New("spl/sdk: not a session")
)

// ResumedHeading and ResumedIntro open every agent's resume prompt
// section (ResumedAgent.Prompt), the deliberation engine's words.
const (
	ResumedHeading = "## Session Context (Resumed)"
	ResumedIntro   = "This session was paused and has now resumed. Below is a summary of recent activity you were involved in before the pause."
)

// SessionInfo is a session as the thread index keeps it, with the error
// and node of a failure read from its status event.
type SessionInfo struct {
	Thread   string
	Status   string     // StatusRunning, …
	Error    string     // why it failed (failed only)
	FailedAt string     // the node it failed at (failed only)
	StatusID records.ID // the status event (zero: running, with none)
	// LastCheckpoint is the id of its latest checkpoint (zero: none).
	LastCheckpoint records.ID
	// Resumable says whether it is a session to resume, by the one rule
	// (rules.Resumable: paused, failed or cancelled, and with a
	// checkpoint a resume would take up): every face offers Resume by
	// it, and decides nothing itself.
	Resumable bool
	Created   time.Time // time of its first record
	Updated   time.Time // time of its newest record
}

// SessionFilter selects and pages Sessions. Its zero value lists every
// session, newest activity first.
type SessionFilter struct {
	Status    []string // sessions with one of these statuses
	Resumable bool     // sessions to resume (rules.Resumable), as SessionInfo.Resumable says
	Offset    int      // skip this many
	Limit     int      // then at most this many; 0: all
	Freshness
}

// Sessions lists the sessions of the thread index that match f, newest
// activity first. Its cost grows with the sessions listed: one read of
// the log per session for its first record, one for its latest
// checkpoint and, for a failed one, one for its status event; a failed
// session whose latest checkpoint is not clean has all its checkpoints
// read, to tell whether it is resumable. With f.Resumable every session
// of a resumable status is read so, before f's page is cut.
func (c *Client) Sessions(ctx context.Context, f SessionFilter) ([]SessionInfo, error) {
	statuses := f.Status
	for _, s := range statuses {
		if records.SessionStatusOf("agent.session."+s) == "" && s != StatusRunning {
			return nil, &records.FieldError{Field: "status", Rule: fmt.Sprintf("must be one of running, paused, failed, completed, cancelled; got %q", s)}
		}
	}
	if f.Resumable {
		if len(statuses) == 0 {
			statuses = rules.ResumableStatuses
		} else {
			statuses = slices.DeleteFunc(slices.Clone(statuses), func(s string) bool { return !slices.Contains(rules.ResumableStatuses, s) })
			if len(statuses) == 0 {
				return nil, nil
			}
		}
	}
	if len(statuses) == 0 {
		statuses = []string{StatusRunning, StatusPaused, StatusFailed, StatusCompleted, StatusCancelled}
	}
	if f.Offset < 0 || f.Limit < 0 {
		return nil, &records.FieldError{Field: "offset", Rule: "offset and limit must not be negative"}
	}
	p, ctx, cancel, err := c.fresh(ctx, f.Freshness)
	defer cancel()
	if err != nil {
		return nil, err
	}
	want := 0
	if f.Limit > 0 && !f.Resumable {
		want = f.Offset + f.Limit
	}
	ts, err := p.reader.Threads(ctx, projections.ThreadFilter{Sessions: statuses, Limit: want})
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: sessions: %w", err)
	}
	skip := f.Offset
	var out []SessionInfo
	for _, t := range ts {
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
		if !f.Resumable && skip > 0 {
			skip-- // not read: the index alone says it is in the page
			continue
		}
		s, err := c.sessionInfo(ctx, p, t)
		if err != nil {
			return out, err
		}
		if f.Resumable && !s.Resumable {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// Session returns the session of thread, or an error wrapping
// ErrNotSession.
func (c *Client) Session(ctx context.Context, thread string, fr Freshness) (SessionInfo, error) {
	p, ctx, cancel, err := c.fresh(ctx, fr)
	defer cancel()
	if err != nil {
		return SessionInfo{}, err
	}
	t, err := p.reader.Thread(ctx, thread)
	if errors.Is(err, ErrNotFound) {
		return SessionInfo{}, fmt.Errorf("thread %q: %w", thread, ErrNotSession)
	}
	if err != nil {
		return SessionInfo{}, fmt.Errorf("spl/sdk: %w", err)
	}
	if t.SessionStatus() == "" {
		return SessionInfo{}, fmt.Errorf("thread %q: %w", thread, ErrNotSession)
	}
	return c.sessionInfo(ctx, p, t)
}

func (c *Client) sessionInfo(ctx context.Context, p *clientProjections, t *projections.Thread) (SessionInfo, error) {
	st := t.SessionStatus()
	s := SessionInfo{Thread: t.Thread, Status: st, Updated: time.UnixMilli(t.LastTS).UTC()}
	var err error
	if s.Resumable, err = c.resumable(ctx, t.Thread, st); err != nil {
		return s, fmt.Errorf("spl/sdk: session %q: %w", t.Thread, err)
	}
	if t.First != 0 {
		if e, err := c.log.At(ctx, t.First); err == nil {
			s.Created = e.Record.Time()
		} else if !errors.Is(err, ErrNotFound) {
			return s, fmt.Errorf("spl/sdk: session %q: %w", t.Thread, err)
		}
	}
	if cp, err := p.reader.Checkpoint(ctx, t.Thread); err == nil {
		s.LastCheckpoint = cp.ID
	} else if !errors.Is(err, ErrNotFound) {
		return s, fmt.Errorf("spl/sdk: session %q: %w", t.Thread, err)
	}
	if ss := t.Session; ss != nil {
		s.StatusID = ss.ID
		if ss.Status == StatusFailed {
			e, err := c.log.At(ctx, ss.Clock)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return s, fmt.Errorf("spl/sdk: session %q: %w", t.Thread, err)
			}
			if err == nil {
				if ev, err := records.DecodeSessionEvent(e.Record.Header.Kind, e.Record.Body); err == nil {
					s.Error, s.FailedAt = ev.Error, ev.Node
				}
			}
		}
	}
	return s, nil
}

// resumable is rules.Resumable for the session of thread, of status:
// its newest checkpoint is read from the log, and all of them only when
// that alone does not decide (rules.ResumeNeedsAll).
func (c *Client) resumable(ctx context.Context, thread, status string) (bool, error) {
	if !slices.Contains(rules.ResumableStatuses, status) {
		return false, nil // no checkpoint can make it one
	}
	sc, err := c.LatestCheckpoint(ctx, thread)
	if errors.Is(err, ErrNotFound) || errors.Is(err, records.ErrCorrupt) {
		return rules.Resumable(status, nil), nil
	}
	if err != nil {
		return false, err
	}
	newest, err := sessionCheckpoint(sc)
	if err != nil {
		return false, err
	}
	p := resumePoint(newest)
	if !rules.ResumeNeedsAll(status, p, true) {
		return rules.Resumable(status, []rules.ResumePoint{p}), nil
	}
	cps, err := c.SessionCheckpoints(ctx, thread, CheckpointQuery{})
	if _, ok := Skipped(err); !ok {
		return false, err
	}
	points := make([]rules.ResumePoint, len(cps))
	for i, s := range cps {
		points[i] = resumePoint(s)
	}
	return rules.Resumable(status, points), nil
}

// resumePoint is s as the resume rules weigh it.
func resumePoint(s SessionCheckpoint) rules.ResumePoint {
	return rules.ResumePoint{ID: s.ID, Clean: s.State.Clean(), Resumable: s.State.Resumable()}
}

// MarkSession records a session status event on thread, as actor: kind
// is one of records.SessionEventKinds (agent.session.failed with
// ev.Error and ev.Node, completed, cancelled; paused and resumed are
// PauseSession's and ResumeSession's).
func (c *Client) MarkSession(ctx context.Context, thread, actor, kind string, ev records.SessionEvent) (Receipt, error) {
	if records.SessionStatusOf(kind) == "" {
		return Receipt{}, &records.FieldError{Field: "kind", Rule: fmt.Sprintf("must be one of %v, got %q", records.SessionEventKinds, kind)}
	}
	return c.Emit(ctx, Event{Act: records.ActDo, Kind: kind, Thread: thread, Actor: actor, Body: ev.Body(kind)})
}

// SessionCheckpoint is a stored checkpoint with its execution state.
type SessionCheckpoint struct {
	SavedCheckpoint
	State *records.ExecState
}

func sessionCheckpoint(sc SavedCheckpoint) (SessionCheckpoint, error) {
	st, err := records.ExecStateOf(sc.Checkpoint)
	if err != nil {
		return SessionCheckpoint{}, fmt.Errorf("checkpoint at clock %d: %w", sc.Clock, err)
	}
	return SessionCheckpoint{SavedCheckpoint: sc, State: st}, nil
}

// CheckpointQuery filters SessionCheckpoints.
type CheckpointQuery struct {
	Type  string // checkpoints of this type (records.CheckpointTypes)
	Clean bool   // clean checkpoints only
	Limit int    // the newest this many that match; 0: all
}

// SessionCheckpoints lists the checkpoints of thread that match q, oldest
// first, each with its execution state. Checkpoints that do not verify
// are passed over: the others are returned with a *SkippedError naming
// them.
func (c *Client) SessionCheckpoints(ctx context.Context, thread string, q CheckpointQuery) ([]SessionCheckpoint, error) {
	if q.Type != "" && !slices.Contains(records.CheckpointTypes, q.Type) {
		return nil, &records.FieldError{Field: "type", Rule: fmt.Sprintf("must be one of %v, got %q", records.CheckpointTypes, q.Type)}
	}
	cps, err := c.ListCheckpoints(ctx, thread, 0)
	skipped, ok := Skipped(err)
	if !ok && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	var out []SessionCheckpoint
	for _, sc := range cps {
		s, err := sessionCheckpoint(sc)
		if err != nil {
			return nil, err
		}
		if (q.Type != "" && s.State.Type != q.Type) || (q.Clean && !s.State.Clean()) {
			continue
		}
		out = append(out, s)
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	if len(skipped) > 0 {
		return out, err
	}
	return out, nil
}

// PauseOptions are what a pause is told; the rest spl reads from the
// thread.
type PauseOptions struct {
	SessionID   string        // the session's id; default the thread
	Depth       int           // transcript events kept per agent; 0: DefaultReplayDepth
	BudgetSpent float64       // budget spent so far
	Rounds      uint64        // rounds completed
	Elapsed     time.Duration // time elapsed in this working session
	// Agents lists the active agents; default those the transcript names
	// (agentId, childAgentId, targetAgentId), in order of appearance.
	Agents []string
	// Scratchpads gives agents' scratch pads; default each agent's newest
	// agent.scratchpad record on the thread ("content").
	Scratchpads map[string]string
	// PendingDelegations are the delegations in flight, each an object;
	// nil: those the transcript leaves unanswered (PendingDelegations).
	PendingDelegations []any
	Reason             string         // why it paused (a constraint, a gate, a call)
	Node               string         // the node it paused at
	Memory             map[string]any // the shared memory to keep
}

// Paused is what PauseSession recorded.
type Paused struct {
	Checkpoint Receipt // the pause checkpoint
	Event      Receipt // the agent.session.paused event
	Pause      records.SessionPause
}

// PauseSession pauses the session of thread, as actor: it computes each
// agent's conversation tail from the transcript records on the thread
// (the last Depth events where the agent is agentId or childAgentId, or
// the target of a delegation), reads their scratch pads, and saves a
// checkpoint (type safe_point, clean, resumable) whose "pause" holds the
// deliberation engine's session checkpoint, then an agent.session.paused
// event naming it. A completed session is refused (ErrSessionCompleted).
func (c *Client) PauseSession(ctx context.Context, thread, actor string, o PauseOptions) (Paused, error) {
	if o.Depth < 0 {
		return Paused{}, &records.FieldError{Field: "depth", Rule: fmt.Sprintf("must be at least 1 (0: %d), got %d", DefaultReplayDepth, o.Depth)}
	}
	if o.Depth == 0 {
		o.Depth = DefaultReplayDepth
	}
	// Named as the checkpoint keeps them (its constraintState).
	if o.BudgetSpent < 0 {
		return Paused{}, &records.FieldError{Field: "constraintState.budgetSpent", Rule: fmt.Sprintf("the budget spent must not be negative, got %v", o.BudgetSpent)}
	}
	if o.Elapsed < 0 {
		return Paused{}, &records.FieldError{Field: "constraintState.timeElapsedMs", Rule: fmt.Sprintf("the time elapsed must not be negative, got %v", o.Elapsed)}
	}
	if st, err := c.statusNow(ctx, thread); err != nil {
		return Paused{}, err
	} else if st == StatusCompleted {
		return Paused{}, fmt.Errorf("pause %q: %w", thread, ErrSessionCompleted)
	}
	events, err := c.bodies(ctx, thread, records.KindTranscript)
	if err != nil {
		return Paused{}, fmt.Errorf("spl/sdk: pause %q: transcript: %w", thread, err)
	}
	pads := make(map[string]string)
	scratch, err := c.bodies(ctx, thread, records.KindScratchpad)
	if err != nil {
		return Paused{}, fmt.Errorf("spl/sdk: pause %q: scratch pads: %w", thread, err)
	}
	for _, b := range scratch {
		if a, ok := b["agentId"].(string); ok {
			if s, ok := b["content"].(string); ok {
				pads[a] = s
			}
		}
	}
	for a, s := range o.Scratchpads {
		pads[a] = s
	}
	agents, parents := TranscriptAgents(events)
	if o.Agents != nil {
		agents = o.Agents
	}
	if o.PendingDelegations == nil {
		o.PendingDelegations = PendingDelegations(events)
	}
	for i, d := range o.PendingDelegations {
		if _, ok := d.(map[string]any); !ok {
			return Paused{}, &records.FieldError{Field: fmt.Sprintf("pendingDelegations[%d]", i), Rule: "must be an object"}
		}
	}
	now := time.Now()
	p := records.SessionPause{
		SessionID: cmp.Or(o.SessionID, thread),
		ConstraintState: records.ConstraintState{
			BudgetSpent: o.BudgetSpent, RoundsCompleted: o.Rounds, TimeElapsedMs: uint64(o.Elapsed.Milliseconds()),
		},
		RoundsCompleted: o.Rounds, PendingDelegations: o.PendingDelegations,
		TranscriptReplayDepth: uint64(o.Depth), CreatedAt: now.UTC().Truncate(time.Millisecond),
	}
	for _, a := range agents {
		depth := uint64(0)
		for q, seen := parents[a], 0; q != "" && seen < len(agents)+1; q, seen = parents[q], seen+1 {
			depth++
		}
		p.ActiveAgents = append(p.ActiveAgents, records.AgentCheckpoint{
			AgentID: a, ParentAgentID: parents[a], Depth: depth,
			ConversationTail: AgentTail(events, a, o.Depth), ExpertiseSnapshot: pads[a],
		})
	}
	clean, resumable := true, true
	reason := cmp.Or(o.Reason, "explicit call")
	st := records.ExecState{
		Type: records.CheckpointSafePoint, CurrentNode: o.Node, SharedMemory: o.Memory,
		IsClean: &clean, CanResumeFrom: &resumable, Description: "session paused: " + reason, Pause: &p,
	}
	cp := records.Checkpoint{
		Summary:   "Session paused: " + reason,
		Learnings: []string{fmt.Sprintf("paused after %d rounds with budget spent %g and %d agents", o.Rounds, o.BudgetSpent, len(p.ActiveAgents))},
		SessionID: p.SessionID,
		Extra:     st.Put(nil),
	}
	r, err := c.SaveCheckpoint(ctx, thread, actor, cp)
	var re *RetentionError
	if err != nil && !errors.As(err, &re) {
		return Paused{}, fmt.Errorf("spl/sdk: pause %q: %w", thread, err)
	}
	ev, err := c.MarkSession(ctx, thread, actor, records.KindSessionPaused, records.SessionEvent{Checkpoint: r.ID.String(), Reason: reason})
	if err != nil {
		return Paused{Checkpoint: r, Pause: p}, fmt.Errorf("spl/sdk: pause %q: %w", thread, err)
	}
	return Paused{Checkpoint: r, Event: ev, Pause: p}, nil
}

// statusNow is the status of thread's session by the one rule
// (records.SessionStatus), read from the log, not the index, so that a
// pause or resume right after another one sees it: "" when the thread
// holds no session. The gets of the newest event of each kind go out
// together.
func (c *Client) statusNow(ctx context.Context, thread string) (string, error) {
	latest := make([]splog.Entry, len(records.SessionEventKinds))
	errs := make([]error, len(records.SessionEventKinds))
	var wg sync.WaitGroup
	for i, kind := range records.SessionEventKinds {
		wg.Go(func() { latest[i], _, errs[i] = c.log.LatestValid(ctx, thread, kind) }) // a message that is no record sets no status
	}
	wg.Wait()
	var best splog.Entry
	for i, e := range latest {
		if errors.Is(errs[i], ErrNotFound) {
			continue
		}
		if errs[i] != nil {
			return "", fmt.Errorf("spl/sdk: session status of %q: %w", thread, errs[i])
		}
		if e.Clock > best.Clock {
			best = e
		}
	}
	if best.Record != nil {
		return records.SessionStatus(best.Record.Header.Kind, true), nil
	}
	for _, kind := range []string{records.KindCheckpoint, records.KindTranscript} {
		_, err := c.log.Latest(ctx, thread, kind)
		switch {
		case err == nil, errors.Is(err, records.ErrCorrupt): // one is there, verified or not
			return records.SessionStatus("", true), nil
		case !errors.Is(err, ErrNotFound):
			return "", fmt.Errorf("spl/sdk: session status of %q: %w", thread, err)
		}
	}
	return records.SessionStatus("", false), nil
}

// bodies reads the bodies of the records of kind on thread, oldest first,
// as generic maps.
func (c *Client) bodies(ctx context.Context, thread, kind string) ([]map[string]any, error) {
	var out []map[string]any
	for e, err := range c.log.Read(ctx, thread, splog.Kind(kind)) {
		if errors.Is(err, records.ErrCorrupt) {
			continue // no record: no event (verify names it)
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := e.Record.DecodeBody(&m); err != nil {
			return nil, fmt.Errorf("record at clock %d: %w", e.Clock, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// involves reports whether transcript event ev is in agent's tail: its
// agentId or childAgentId is the agent, or it is a delegation to it.
func involves(ev map[string]any, agent string) bool {
	return ev["agentId"] == agent || ev["childAgentId"] == agent ||
		(ev["type"] == "delegation" && ev["targetAgentId"] == agent)
}

// AgentTail returns agent's conversation tail: the last depth events of
// the transcript (oldest first) that involve the agent, in order. No
// agent sees another's unrelated work.
func AgentTail(events []map[string]any, agent string, depth int) []map[string]any {
	out := []map[string]any{}
	for i := len(events) - 1; i >= 0 && len(out) < depth; i-- {
		if involves(events[i], agent) {
			out = append(out, events[i])
		}
	}
	slices.Reverse(out)
	return out
}

// Milliseconds is a count of milliseconds a face was given in field (the
// HTTP API's elapsedMs, max_age_ms, MCP's elapsed_ms) as a duration: 0 or
// more, and no more than a time.Duration holds.
func Milliseconds(field string, ms int64) (time.Duration, error) {
	if ms < 0 || ms > int64(math.MaxInt64/time.Millisecond) {
		return 0, &records.FieldError{Field: field, Rule: "must be 0 or a positive number of milliseconds, at most " + strconv.FormatInt(int64(math.MaxInt64/time.Millisecond), 10)}
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// sameText says whether a and b are the same non-empty text (a value of
// a transcript may be anything: never compared as an interface).
func sameText(a, b any) bool {
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	return ok1 && ok2 && x != "" && x == y
}

// PendingDelegations are the delegations of a transcript still in flight:
// each event of type "delegation" (from agentId to targetAgentId) that no
// later "child_result" event answers (agentId the delegator, childAgentId
// the target; when both carry a "delegationId", it must match). A result
// answers the oldest open delegation it can. The events are returned as
// they are, oldest first; [] when none is open.
func PendingDelegations(events []map[string]any) []any {
	type open struct {
		ev       map[string]any
		answered bool
	}
	var ds []*open
	for _, ev := range events {
		switch ev["type"] {
		case "delegation":
			if ev["targetAgentId"] != nil {
				ds = append(ds, &open{ev: ev})
			}
		case "child_result":
			for _, d := range ds {
				if d.answered || !sameText(d.ev["agentId"], ev["agentId"]) || !sameText(d.ev["targetAgentId"], ev["childAgentId"]) {
					continue
				}
				if _, ok := ev["delegationId"]; ok && d.ev["delegationId"] != nil && !reflect.DeepEqual(d.ev["delegationId"], ev["delegationId"]) {
					continue
				}
				d.answered = true
				break
			}
		}
	}
	out := []any{}
	for _, d := range ds {
		if !d.answered {
			out = append(out, d.ev)
		}
	}
	return out
}

// TranscriptAgents returns the agents a transcript names (agentId,
// childAgentId, targetAgentId) in order of first appearance, and each
// delegated agent's parent: the agent whose event names it as
// childAgentId, or delegates to it.
func TranscriptAgents(events []map[string]any) ([]string, map[string]string) {
	var agents []string
	parents := make(map[string]string)
	seen := make(map[string]bool)
	add := func(v any) string {
		s, _ := v.(string)
		if s != "" && !seen[s] {
			seen[s] = true
			agents = append(agents, s)
		}
		return s
	}
	for _, ev := range events {
		a := add(ev["agentId"])
		for _, k := range []string{"childAgentId", "targetAgentId"} {
			if k == "targetAgentId" && ev["type"] != "delegation" {
				continue
			}
			if ch := add(ev[k]); ch != "" && a != "" && ch != a && parents[ch] == "" {
				parents[ch] = a
			}
		}
	}
	return agents, parents
}
