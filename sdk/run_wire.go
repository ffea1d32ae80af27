package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/spl-dev/spl/wire"
)

// Wire returns the JSON form of i, as "spl run list --json" prints it and
// GET /v1/runs answers it.
func (i RunInfo) Wire() wire.Run {
	w := wire.Run{Thread: i.Thread, RunID: i.RunID, Status: string(i.Status), Phase: i.Phase,
		LatestID: wire.OptionalID(i.Latest.ID), LatestClock: i.Latest.Clock, Problem: i.Problem, WaitingFor: i.WaitingFor,
		Cancellable: i.Status.Cancellable()}
	if !i.Updated.IsZero() {
		w.Updated, w.UpdatedTS = wire.FormatTime(i.Updated), i.Updated.UnixMilli()
	}
	return w
}

// Wire returns the JSON form of d, as "spl run show --json" prints it and
// GET /v1/runs/{run} answers it.
func (d RunDetail) Wire() (wire.RunDetail, error) {
	w := wire.RunDetail{Run: d.RunInfo.Wire(), Phases: []wire.RunPhase{}, Effects: []wire.RunEffect{},
		EffectCalls: d.Calls, Replayed: d.Replayed, TerminalResult: json.RawMessage("null")}
	for _, p := range d.Phases {
		wp := wire.RunPhase{Phase: p.Phase, Kind: p.Kind, ID: p.ID.String(), Clock: p.Clock, Time: wire.FormatTime(p.Time), TS: p.Time.UnixMilli()}
		if p.Blob != nil {
			s := p.Blob.Digest
			wp.Blob = &s
		}
		w.Phases = append(w.Phases, wp)
	}
	for _, e := range d.Effects {
		we := wire.RunEffect{CallID: e.CallID, Tool: e.Tool, InputHash: e.InputHash, OutputHash: e.OutputHash,
			ID: e.ID.String(), Clock: e.Clock, Time: wire.FormatTime(e.Time), TS: e.Time.UnixMilli()}
		if d.Outputs && e.Output != nil {
			we.Output = e.Output
		}
		w.Effects = append(w.Effects, we)
	}
	if s := d.Snapshot; s != nil {
		u := s.Usage
		if u == nil {
			u = map[string]int64{}
		}
		w.Snapshot = &wire.RunSnapshot{Phase: s.Phase, Clock: s.Clock, Step: s.Step, Messages: s.Messages,
			LLMCalls: s.LLMCalls, ToolCalls: s.ToolCalls, Usage: u, TotalCostUSD: s.TotalCostUSD, Pending: s.Pending}
	}
	if !d.Terminal.IsZero() {
		j, err := d.Terminal.JSON()
		if err != nil {
			return w, err
		}
		w.TerminalResult = j
	}
	return w, nil
}

// Wire returns the JSON form of s, as POST /v1/runs/{run}/open answers it.
func (s RunState) Wire(thread, runID string) (wire.RunState, error) {
	w := wire.RunState{RunID: runID, Thread: thread, Status: string(s.Status), Resumed: s.Resumed,
		TerminalResult: json.RawMessage("null"), PendingLLMResponse: json.RawMessage("null"), Effects: []wire.RunEffect{}}
	var err error
	if w.Latest, err = checkpointState(s.Latest); err != nil {
		return w, err
	}
	if w.Snapshot, err = checkpointState(s.Snapshot); err != nil {
		return w, err
	}
	if s.Status == RunTerminal && !s.Terminal.IsZero() {
		if w.TerminalResult, err = s.Terminal.JSON(); err != nil {
			return w, err
		}
	}
	if !s.PendingLLMResponse.IsZero() {
		if w.PendingLLMResponse, err = s.PendingLLMResponse.JSON(); err != nil {
			return w, err
		}
	}
	for _, e := range s.Effects {
		w.Effects = append(w.Effects, wire.RunEffect{CallID: e.CallID, Tool: e.Tool, InputHash: e.InputHash, OutputHash: e.OutputHash,
			ID: e.ID.String(), Clock: e.Clock, Time: wire.FormatTime(e.Time), TS: e.Time.UnixMilli()})
	}
	if c := s.Cancel; c != nil {
		w.Cancel = &wire.RunCancel{Reason: c.Reason, Actor: c.Actor, Request: c.Request.ID.String(), Clock: c.Request.Clock}
	}
	if s.Status == RunWaiting {
		w.WaitingFor = awaitedSignal(s.Latest)
	}
	if g := s.Signal; g != nil {
		ws, err := g.Wire()
		if err != nil {
			return w, err
		}
		w.Signal = &ws
	}
	w.Signals = make([]wire.RunSignal, 0, len(s.Signals))
	for _, g := range s.Signals {
		ws, err := g.Wire()
		if err != nil {
			return w, err
		}
		w.Signals = append(w.Signals, ws)
	}
	return w, nil
}

// checkpointState is the JSON form of cp with its payload (nil for nil).
func checkpointState(cp *RunCheckpoint) (*wire.RunCheckpointState, error) {
	if cp == nil {
		return nil, nil
	}
	p, err := cp.Payload.JSON()
	if err != nil {
		return nil, fmt.Errorf("run checkpoint at clock %d: payload: %w", cp.Clock, err)
	}
	return &wire.RunCheckpointState{Phase: cp.Phase, Kind: cp.Kind, ID: cp.ID.String(), Clock: cp.Clock,
		Time: wire.FormatTime(cp.Time), TS: cp.Time.UnixMilli(), Payload: p}, nil
}

// Wire returns the JSON form of s.
func (s RunSignal) Wire() (wire.RunSignal, error) {
	data, err := s.Data.JSON()
	if err != nil {
		return wire.RunSignal{}, fmt.Errorf("signal at clock %d: data: %w", s.Request.Clock, err)
	}
	return wire.RunSignal{Name: s.Name, Data: data, Actor: s.Actor, Request: s.Request.ID.String(), Clock: s.Request.Clock}, nil
}
