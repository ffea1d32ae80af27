package sdk

import (
	"cmp"
	"fmt"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// Wire returns the JSON form of s that the CLI's --json and the HTTP API
// print.
func (s SessionInfo) Wire() wire.Session {
	return wire.NewSession(s.Thread, s.Status, s.Error, s.FailedAt, s.LastCheckpoint, s.Created, s.Updated, s.Resumable)
}

// Wire returns the JSON form of the checkpoint with its execution state.
func (s SessionCheckpoint) Wire() (wire.SessionCheckpoint, error) {
	return wire.NewSessionCheckpoint(s.ID, s.Clock, s.Record.Record, s.Checkpoint, s.State)
}

// Wire returns the JSON form of a pause.
func (p Paused) Wire() (wire.Paused, error) {
	sp, err := wire.NewSessionPause(&p.Pause)
	if err != nil {
		return wire.Paused{}, err
	}
	return wire.Paused{SessionPause: sp, Checkpoint: p.Checkpoint.ID.String(), Clock: p.Checkpoint.Clock, Event: p.Event.ID.String()}, nil
}

// Wire returns the JSON form of a resume context.
func (rc ResumeContext) Wire() (wire.Resume, error) {
	mem, err := records.JSONValue(rc.Memory)
	if err != nil {
		return wire.Resume{}, fmt.Errorf("memory: %w", err)
	}
	sid := rc.Thread
	if p := rc.From.State.Pause; p != nil {
		sid = p.SessionID
	}
	j := wire.Resume{
		SessionID: sid, ResumedFrom: rc.From.ID.String(), ResumedFromType: rc.From.State.Type,
		WasStatus: rc.WasStatus, Status: StatusRunning, ConstraintState: wire.NewConstraintState(rc.ConstraintState),
		RoundsCompleted: rc.RoundsCompleted, Memory: mem, Redacted: rc.Redacted, Agents: []wire.ResumedAgent{},
		Event: rc.Event.ID.String(), Skipped: rc.Skipped,
	}
	if j.Redacted == nil {
		j.Redacted = []string{}
	}
	if j.Checkpoint, err = rc.From.Wire(); err != nil {
		return wire.Resume{}, fmt.Errorf("checkpoint: %w", err)
	}
	j.ResumeAt = cmp.Or(rc.From.State.NextNode, rc.From.State.CurrentNode)
	if rc.MemoryEdit != nil {
		j.MemoryEdit = wire.OptionalID(rc.MemoryEdit.ID)
	}
	for _, a := range rc.Agents {
		ac, err := wire.NewAgentCheckpoint(a.AgentCheckpoint)
		if err != nil {
			return wire.Resume{}, err
		}
		j.Agents = append(j.Agents, wire.ResumedAgent{AgentCheckpoint: ac, Prompt: a.Prompt})
	}
	return j, nil
}
