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
// checkpoint (o.From, else the latest; for a failed session the latest
// clean one that can be resumed from), applies o.Set to its memory and
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

// resumeSession is one round of ResumeSession, its appends conditional on
// the thread's clock read first.
func (c *Client) resumeSession(ctx context.Context, thread, actor string, o ResumeOptions) (ResumeContext, error) {
	at, err := c.log.ThreadClock(ctx, thread)
	if err != nil {
		return ResumeContext{}, fmt.Errorf("spl/sdk: resume %q: %w", thread, err)
	}
	status, err := c.statusNow(ctx, thread)
	if err != nil {
		return ResumeContext{}, err
	}
	if status == StatusCompleted {
		return ResumeContext{}, fmt.Errorf("resume %q: %w", thread, ErrSessionCompleted)
	}
	cps, err := c.SessionCheckpoints(ctx, thread, CheckpointQuery{})
	skipped, ok := Skipped(err)
	if !ok {
		return ResumeContext{}, fmt.Errorf("spl/sdk: resume %q: %w", thread, err)
	}
	if o.From.IsZero() && o.Ref != "" {
		sc, err := c.FindCheckpoint(ctx, thread, o.Ref)
		if err != nil {
			return ResumeContext{}, fmt.Errorf("resume %q from %q: %w", thread, o.Ref, err)
		}
		o.From = sc.ID
	}
	var from *SessionCheckpoint
	switch {
	case !o.From.IsZero():
		i := slices.IndexFunc(cps, func(s SessionCheckpoint) bool { return s.ID == o.From })
		if i < 0 {
			return ResumeContext{}, fmt.Errorf("resume %q: checkpoint %s: %w", thread, o.From, ErrNotFound)
		}
		from = &cps[i]
	case status == StatusFailed:
		for i := len(cps) - 1; i >= 0; i-- {
			if cps[i].State.Clean() && cps[i].State.Resumable() {
				from = &cps[i]
				break
			}
		}
		if from == nil {
			return ResumeContext{}, fmt.Errorf("resume %q: failed, and none of its %d checkpoints is clean and resumable: %w", thread, len(cps), ErrNoResumePoint)
		}
	case len(cps) > 0:
		from = &cps[len(cps)-1]
	default:
		return ResumeContext{}, fmt.Errorf("resume %q: no checkpoint: %w", thread, ErrNoResumePoint)
	}
	if !from.State.Resumable() {
		why := from.State.Description
		if why == "" {
			why = "can_resume_from is false"
		}
		return ResumeContext{}, fmt.Errorf("resume %q from %s (clock %d): %s: %w", thread, from.ID, from.Clock, why, ErrNotResumable)
	}
	rc := ResumeContext{Thread: thread, From: *from, WasStatus: status, Memory: make(map[string]any), Skipped: skipped}
	maps.Copy(rc.Memory, from.State.SharedMemory)
	maps.Copy(rc.Memory, o.Set)
	if len(o.Set) > 0 {
		r, err := c.appendEventAfter(ctx, Event{Act: records.ActDo, Kind: records.KindSessionMemory, Thread: thread, Actor: actor,
			Body: records.SessionEvent{Checkpoint: from.ID.String(), Set: o.Set}.Body(records.KindSessionMemory)}, at)
		if err != nil {
			return rc, fmt.Errorf("spl/sdk: resume %q: record memory changes: %w", thread, err)
		}
		at = r.Clock
		rc.MemoryEdit = &Receipt{ID: r.ID, Clock: r.Clock}
		if ev, err := records.DecodeSessionEvent(records.KindSessionMemory, r.Body); err == nil {
			for k := range o.Set {
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
