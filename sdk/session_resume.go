package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/rules"
)

// ResumeOptions say where a resume starts and what it changes.
type ResumeOptions struct {
	// From is the checkpoint to resume from; zero: the latest (for a
	// failed session, the latest clean one that can be resumed from).
	From records.ID
	// Ref names the checkpoint to resume from as FindCheckpoint reads it:
	// its id, the end of its id, or its name. Ignored when From is set.
	Ref string
	// Set changes keys of the shared memory (--set key=value). The change
	// is recorded (agent.session.memory), redacted like any record.
	Set map[string]any
}

// ResumedAgent is an agent to re-spawn: its checkpoint (scratch pad,
// tail) and its prompt section.
type ResumedAgent struct {
	records.AgentCheckpoint
	// Prompt is ResumedHeading, a blank line, ResumedIntro, a blank line,
	// then the agent's tail, one event a line ("- " and the event's JSON).
	Prompt string
}

// ResumeContext is what a resumed session starts from.
type ResumeContext struct {
	Thread     string
	From       SessionCheckpoint // the checkpoint resumed from
	WasStatus  string            // the status before the resume
	Memory     map[string]any    // its shared memory with Set applied
	Redacted   []string          // keys of Set the redaction policy kept off the log
	MemoryEdit *Receipt          // the agent.session.memory record of Set (nil: none)
	// ConstraintState is the rules applied: time elapsed reset to 0,
	// budget spent and rounds carried over.
	ConstraintState records.ConstraintState
	RoundsCompleted uint64 // where the session continues from
	Agents          []ResumedAgent
	Event           Receipt // the agent.session.resumed record
	// Skipped are the clocks of checkpoints that do not verify, passed
	// over: the resume chose among the others.
	Skipped []uint64
}

// ResumeSession resumes the session of thread, as actor: it picks the
// checkpoint by the one rule, rules.ResumeFrom (o.From, else the latest;
// for a failed session the latest clean one that can be resumed from),
// applies o.Set to its memory and
// records the change, carries its budget and rounds and resets its time,
// builds each agent's prompt section, and records an
// agent.session.resumed event naming the checkpoint. It refuses a
// completed session (ErrSessionCompleted), a session with no checkpoint
// to resume from (ErrNoResumePoint), a checkpoint whose can_resume_from
// is false (ErrNotResumable), and a From not on the thread (ErrNotFound).
//
// What it appends is conditional on the thread being where it was read:
// a pause, completion or checkpoint that lands in between makes it read
// and decide again (up to resumeRounds times), so that a resume never
// follows a completion it did not see.
func (c *Client) ResumeSession(ctx context.Context, thread, actor string, o ResumeOptions) (ResumeContext, error) {
	for round := 1; ; round++ {
		rc, err := c.resumeSession(ctx, thread, actor, o)
		if !errors.Is(err, splog.ErrMoved) || round == resumeRounds {
			return rc, err
		}
	}
}

// resumeRounds bounds how often ResumeSession reads and decides again
// when its thread moved under it.
const resumeRounds = 5

// resumeSession is one round of ResumeSession: read, decide, append on
// condition that the thread is still where it was read.
func (c *Client) resumeSession(ctx context.Context, thread, actor string, o ResumeOptions) (ResumeContext, error) {
	rd, err := c.readResume(ctx, thread)
	if err != nil {
		return ResumeContext{}, err
	}
	from, err := c.decideResume(ctx, rd, o)
	if err != nil {
		return ResumeContext{}, err
	}
	return c.appendResume(ctx, rd, actor, from, o.Set)
}

// resumeRead is what a round of ResumeSession read of its thread.
type resumeRead struct {
	thread  string
	at      uint64 // the thread's clock before the reads: the appends are conditional on it
	status  string
	cps     []SessionCheckpoint // oldest first, those that verify
	skipped []uint64            // clocks of the checkpoints that do not
}

// readResume reads what a resume decides from: the thread's clock first,
// then its session's status and its checkpoints.
func (c *Client) readResume(ctx context.Context, thread string) (resumeRead, error) {
	rd := resumeRead{thread: thread}
	var err error
	if rd.at, err = c.log.ThreadClock(ctx, thread); err != nil {
		return rd, fmt.Errorf("spl/sdk: resume %q: %w", thread, err)
	}
	if rd.status, err = c.statusNow(ctx, thread); err != nil {
		return rd, err
	}
	if rd.status == StatusCompleted {
		return rd, nil // refused whatever the checkpoints: not read
	}
	cps, err := c.SessionCheckpoints(ctx, thread, CheckpointQuery{})
	skipped, ok := Skipped(err)
	if !ok {
		return rd, fmt.Errorf("spl/sdk: resume %q: %w", thread, err)
	}
	rd.cps, rd.skipped = cps, skipped
	return rd, nil
}

// decideResume is the checkpoint a resume of what rd read takes up
// (o.From, else the one o.Ref names, else the rule's choice:
// rules.ResumeFrom), or the refusal as an error.
func (c *Client) decideResume(ctx context.Context, rd resumeRead, o ResumeOptions) (*SessionCheckpoint, error) {
	thread, cps := rd.thread, rd.cps
	if o.From.IsZero() && o.Ref != "" && rd.status != StatusCompleted {
		m := refMatch{ref: o.Ref}
		for _, s := range cps {
			m.add(s.SavedCheckpoint)
		}
		sc, err := m.result(thread)
		if errors.Is(err, ErrNotFound) {
			// Not among those read: say why as FindCheckpoint does (an
			// erased one, a record that is no checkpoint).
			sc, err = c.FindCheckpoint(ctx, thread, o.Ref)
		}
		if err != nil {
			return nil, fmt.Errorf("resume %q from %q: %w", thread, o.Ref, err)
		}
		o.From = sc.ID
	}
	points := make([]rules.ResumePoint, len(cps))
	for i, s := range cps {
		points[i] = resumePoint(s)
	}
	i, why := rules.ResumeFrom(rd.status, points, o.From)
	switch why {
	case rules.NotRefused:
		return &cps[i], nil
	case rules.RefuseCompleted:
		return nil, fmt.Errorf("resume %q: %w", thread, ErrSessionCompleted)
	case rules.RefuseUnknownFrom:
		return nil, fmt.Errorf("resume %q: checkpoint %s: %w", thread, o.From, ErrNotFound)
	case rules.RefuseNoCleanPoint:
		return nil, fmt.Errorf("resume %q: failed, and none of its %d checkpoints is clean and resumable: %w", thread, len(cps), ErrNoResumePoint)
	case rules.RefuseNoCheckpoint:
		return nil, fmt.Errorf("resume %q: no checkpoint: %w", thread, ErrNoResumePoint)
	}
	from := &cps[i] // rules.RefuseNotResumable
	reason := from.State.Description
	if reason == "" {
		reason = "can_resume_from is false"
	}
	return nil, fmt.Errorf("resume %q from %s (clock %d): %s: %w", thread, from.ID, from.Clock, reason, ErrNotResumable)
}

// appendResume takes up checkpoint from, as actor: it records the
// changes set makes to its memory, then the resumed event, each appended
// only if the thread is where rd read it (else an error wrapping
// log.ErrMoved: a pause, completion or checkpoint landed in between).
func (c *Client) appendResume(ctx context.Context, rd resumeRead, actor string, from *SessionCheckpoint, set map[string]any) (ResumeContext, error) {
	thread, at := rd.thread, rd.at
	rc := ResumeContext{Thread: thread, From: *from, WasStatus: rd.status, Memory: make(map[string]any), Skipped: rd.skipped}
	maps.Copy(rc.Memory, from.State.SharedMemory)
	maps.Copy(rc.Memory, set)
	if len(set) > 0 {
		r, err := c.appendEventAfter(ctx, Event{Act: records.ActDo, Kind: records.KindSessionMemory, Thread: thread, Actor: actor,
			Body: records.SessionEvent{Checkpoint: from.ID.String(), Set: set}.Body(records.KindSessionMemory)}, at)
		if err != nil {
			return rc, fmt.Errorf("spl/sdk: resume %q: record memory changes: %w", thread, err)
		}
		at = r.Clock
		rc.MemoryEdit = &Receipt{ID: r.ID, Clock: r.Clock}
		if ev, err := records.DecodeSessionEvent(records.KindSessionMemory, r.Body); err == nil {
			for k := range set {
				if _, kept := ev.Set[k]; !kept {
					rc.Redacted = append(rc.Redacted, k)
				}
			}
			slices.Sort(rc.Redacted)
		}
	}
	if p := from.State.Pause; p != nil {
		rc.ConstraintState = records.ConstraintState{BudgetSpent: p.ConstraintState.BudgetSpent, RoundsCompleted: p.ConstraintState.RoundsCompleted}
		rc.RoundsCompleted = p.RoundsCompleted
		for _, a := range p.ActiveAgents {
			prompt, err := ResumePrompt(a.ConversationTail)
			if err != nil {
				return rc, fmt.Errorf("spl/sdk: resume %q: agent %s: %w", thread, a.AgentID, err)
			}
			rc.Agents = append(rc.Agents, ResumedAgent{AgentCheckpoint: a, Prompt: prompt})
		}
	}
	cs := rc.ConstraintState
	body := records.SessionEvent{Checkpoint: from.ID.String(), ConstraintState: &cs}.Body(records.KindSessionResumed)
	ev, err := c.appendEventAfter(ctx, Event{Act: records.ActDo, Kind: records.KindSessionResumed, Thread: thread, Actor: actor, Body: body}, at)
	if err != nil {
		return rc, fmt.Errorf("spl/sdk: resume %q: %w", thread, err)
	}
	rc.Event = Receipt{ID: ev.ID, Clock: ev.Clock}
	return rc, nil
}

// appendEventAfter is AppendEvent on condition that ev's thread is still
// at clock after (else an error wrapping log.ErrMoved, nothing appended).
func (c *Client) appendEventAfter(ctx context.Context, ev Event, after uint64) (Record, error) {
	rec, err := c.record(ev)
	if err != nil {
		return Record{}, err
	}
	return c.append(ctx, rec, true, after)
}

// ResumePrompt is an agent's resume prompt section: ResumedHeading, a
// blank line, ResumedIntro, a blank line, then its tail, one event a line
// ("- " and the event's JSON, keys sorted).
func ResumePrompt(tail []map[string]any) (string, error) {
	var b strings.Builder
	b.WriteString(ResumedHeading + "\n\n" + ResumedIntro + "\n\n")
	for _, ev := range tail {
		v, err := records.JSONValue(ev)
		if err != nil {
			return "", err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		b.WriteString("- ")
		b.Write(j)
		b.WriteString("\n")
	}
	return b.String(), nil
}
