package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// runsResponse is the answer of GET /v1/runs.
type runsResponse struct {
	Runs []wire.Run `json:"runs"`
}

// handleRuns lists runs (?thread=T, ?status=running|terminal|failed), as
// spl run list does.
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	c := s.liveLog(w)
	if c == nil {
		return
	}
	q := r.URL.Query()
	runs, err := c.Runs(r.Context(), sdk.RunFilter{Thread: q.Get("thread"), Status: sdk.RunStatus(q.Get("status"))})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := runsResponse{Runs: make([]wire.Run, len(runs))}
	for i, run := range runs {
		out.Runs[i] = run.Wire()
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRun shows one run (?thread=T when its id is on several threads),
// as spl run show does.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	c := s.liveLog(w)
	if c == nil {
		return
	}
	d, err := c.RunDetail(r.Context(), r.URL.Query().Get("thread"), r.PathValue("run"))
	if err == nil && r.URL.Query().Get("outputs") == "true" {
		err = c.EffectOutputs(r.Context(), &d)
	}
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	out, err := d.Wire()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// cancelRequest is the body of POST /v1/runs/{run}/cancel.
type cancelRequest struct {
	Thread string `json:"thread"` // when the run id is on several threads
	Reason string `json:"reason"`
	Actor  string `json:"actor"`
}

// cancelResponse is its answer: the cancel request recorded.
type cancelResponse struct {
	Run     string `json:"run_id"`
	Request string `json:"request"` // the id of the agent.run.cancel record
	Clock   uint64 `json:"clock"`
}

// handleCancel cancels a run, as spl run cancel does.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	var req cancelRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	rc, err := c.CancelRun(r.Context(), req.Thread, r.PathValue("run"), req.Reason, req.Actor)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cancelResponse{Run: r.PathValue("run"), Request: rc.ID.String(), Clock: rc.Clock})
}

// signalRequest is the body of POST /v1/runs/{run}/signal.
type signalRequest struct {
	Thread string          `json:"thread"` // when the run id is on several threads
	Name   string          `json:"name"`
	Data   json.RawMessage `json:"data"` // any JSON value
	Actor  string          `json:"actor"`
}

// signalResponse is its answer: the signal recorded.
type signalResponse struct {
	Run     string `json:"run_id"`
	Name    string `json:"name"`
	Request string `json:"request"` // the id of the agent.run.signal record
	Clock   uint64 `json:"clock"`
}

// handleSignal sends a waiting run its signal, as spl run signal does.
func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req signalRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	var data any
	if req.Data != nil && string(req.Data) != "null" {
		v, err := records.ValueFromJSON(req.Data, "data")
		if err != nil {
			s.refuseInvalid(w, r, err)
			return
		}
		data = v
	}
	rc, err := c.SignalRun(r.Context(), req.Thread, r.PathValue("run"), req.Name, data, req.Actor)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, signalResponse{Run: r.PathValue("run"), Name: req.Name, Request: rc.ID.String(), Clock: rc.Clock})
}

// runRoutes adds the routes of runs (docs/http-api.yaml).
func (s *Server) runRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/runs", s.handleRuns)
	mux.HandleFunc("GET /v1/runs/{run}", s.handleRun)
	mux.HandleFunc("POST /v1/runs/{run}/cancel", s.handleCancel)
	mux.HandleFunc("POST /v1/runs/{run}/signal", s.handleSignal)
	mux.HandleFunc("POST /v1/runs/{run}/open", s.handleOpenRun)
	mux.HandleFunc("POST /v1/runs/{run}/checkpoints", s.handleRunCheckpoints)
	mux.HandleFunc("POST /v1/runs/{run}/effects", s.handleRunEffect)
	mux.HandleFunc("POST /v1/runs/{run}/finish", s.handleFinishRun)
}

// Runs written by runners in other processes (the Python and TypeScript
// SDKs): each route is one call of the service layer (sdk/run_remote.go),
// which keeps every rule of runs; these decode JSON and answer it.

// openRunRequest is the body of POST /v1/runs/{run}/open.
type openRunRequest struct {
	Thread string `json:"thread"`
}

// handleOpenRun answers what a runner needs to continue a run: sdk's
// RunState.
func (s *Server) handleOpenRun(w http.ResponseWriter, r *http.Request) {
	var req openRunRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	st, err := c.RunState(r.Context(), req.Thread, r.PathValue("run"))
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	out, err := st.Wire(req.Thread, r.PathValue("run"))
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// runCheckpointsRequest is the body of POST /v1/runs/{run}/checkpoints.
type runCheckpointsRequest struct {
	Thread      string              `json:"thread"`
	Actor       string              `json:"actor"`
	Checkpoints []runCheckpointJSON `json:"checkpoints"`
}

// runCheckpointJSON is one checkpoint of it.
type runCheckpointJSON struct {
	Phase       string          `json:"phase"`
	Payload     json.RawMessage `json:"payload"` // a JSON object; absent: {}
	TimestampMS *int64          `json:"timestamp_ms"`
}

// maxRunCheckpoints bounds the checkpoints of one request.
const maxRunCheckpoints = 256

// receiptsResponse is the answer of POST /v1/runs/{run}/checkpoints.
type receiptsResponse struct {
	Receipts []wire.Receipt `json:"receipts"`
}

// handleRunCheckpoints stores a runner's phase checkpoints, in order.
func (s *Server) handleRunCheckpoints(w http.ResponseWriter, r *http.Request) {
	var req runCheckpointsRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	cps, err := checkpointWrites(req.Checkpoints)
	if err != nil {
		s.refuseInvalid(w, r, err)
		return
	}
	rcs, err := c.WriteRunCheckpoints(r.Context(), req.Thread, r.PathValue("run"), req.Actor, cps)
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, receiptsResponse{Receipts: wireReceipts(rcs)})
}

// checkpointWrites reads a request's checkpoints (their payloads read
// strictly, as record bodies are).
func checkpointWrites(in []runCheckpointJSON) ([]sdk.RunCheckpointWrite, error) {
	if len(in) > maxRunCheckpoints {
		return nil, &records.FieldError{Field: "checkpoints", Rule: fmt.Sprintf("at most %d in one request", maxRunCheckpoints)}
	}
	cps := make([]sdk.RunCheckpointWrite, len(in))
	for i, cp := range in {
		cps[i].Phase = cp.Phase
		if cp.Payload != nil && string(cp.Payload) != "null" {
			raw, err := records.ObjectFromJSON(cp.Payload, fmt.Sprintf("checkpoints[%d].payload", i))
			if err != nil {
				return nil, err
			}
			cps[i].Payload = cbor.RawMessage(raw)
		}
		if cp.TimestampMS != nil {
			cps[i].Time = time.UnixMilli(*cp.TimestampMS)
		}
	}
	return cps, nil
}

// wireReceipts are the JSON forms of rcs ([] for none).
func wireReceipts(rcs []sdk.Receipt) []wire.Receipt {
	out := make([]wire.Receipt, len(rcs))
	for i, rc := range rcs {
		out[i] = wire.Receipt{ID: rc.ID.String(), Clock: rc.Clock}
	}
	return out
}

// runEffectRequest is the body of POST /v1/runs/{run}/effects.
type runEffectRequest struct {
	Thread string          `json:"thread"`
	Actor  string          `json:"actor"`
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Output json.RawMessage `json:"output"` // absent: is a result recorded?
	Rerun  bool            `json:"rerun"`
	// Checkpoints queued before the effect, stored before it: a step in
	// one request (with output only).
	Checkpoints []runCheckpointJSON `json:"checkpoints"`
}

// runEffectResponse is its answer.
type runEffectResponse struct {
	Status string          `json:"status"` // replayed, absent or recorded
	Output json.RawMessage `json:"output,omitempty"`
	ID     string          `json:"id,omitempty"`
	Clock  uint64          `json:"clock,omitempty"`
	// Checkpoints are the receipts of the request's checkpoints, stored.
	Checkpoints []wire.Receipt `json:"checkpoints,omitempty"`
}

// handleRunEffect is one step of the effect protocol (sdk.RecordEffect).
func (s *Server) handleRunEffect(w http.ResponseWriter, r *http.Request) {
	var req runEffectRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	if req.Args == nil {
		req.Args = json.RawMessage("null")
	}
	call := sdk.EffectCall{CallID: req.CallID, Tool: req.Tool, Args: req.Args, Rerun: req.Rerun, Actor: req.Actor}
	if req.Checkpoints != nil {
		cps, err := checkpointWrites(req.Checkpoints)
		if err != nil {
			s.refuseInvalid(w, r, err)
			return
		}
		call.Before = cps
	}
	if req.Output != nil {
		// The request's layout is the transport's, not the output's.
		var b bytes.Buffer
		if err := json.Compact(&b, req.Output); err != nil {
			s.refuseInvalid(w, r, &records.FieldError{Field: "output", Rule: "must be JSON: " + err.Error()})
			return
		}
		call.Output = b.Bytes()
	}
	a, err := c.RecordEffect(r.Context(), req.Thread, r.PathValue("run"), call)
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	out := runEffectResponse{Status: string(a.Outcome), Output: a.Output}
	if call.Before != nil {
		out.Checkpoints = wireReceipts(a.Before)
	}
	code := http.StatusOK
	if a.Outcome != sdk.EffectAbsent {
		out.ID, out.Clock = a.Receipt.ID.String(), a.Receipt.Clock
	}
	if a.Outcome == sdk.EffectRecorded {
		code = http.StatusCreated
	}
	writeJSON(w, code, out)
}

// finishRunRequest is the body of POST /v1/runs/{run}/finish.
type finishRunRequest struct {
	Thread   string          `json:"thread"`
	Actor    string          `json:"actor"`
	State    string          `json:"state"`
	Result   json.RawMessage `json:"result"`
	Payload  json.RawMessage `json:"payload"` // more fields of the run_terminal checkpoint
	Replayed int             `json:"replayed_effect_count"`
}

// finishRunResponse is its answer.
type finishRunResponse struct {
	ID     string `json:"id"`
	Clock  uint64 `json:"clock"`
	Status string `json:"status"`
}

// handleFinishRun writes a runner's run_terminal checkpoint.
func (s *Server) handleFinishRun(w http.ResponseWriter, r *http.Request) {
	var req finishRunRequest
	c, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	t := sdk.Terminal{State: req.State}
	if req.Result != nil && string(req.Result) != "null" {
		v, err := records.ValueFromJSON(req.Result, "result")
		if err != nil {
			s.refuseInvalid(w, r, err)
			return
		}
		t.Result = v
	}
	if req.Payload != nil && string(req.Payload) != "null" {
		raw, err := records.ObjectFromJSON(req.Payload, "payload")
		if err != nil {
			s.refuseInvalid(w, r, err)
			return
		}
		var m map[string]cbor.RawMessage
		if err := cbor.Unmarshal(raw, &m); err != nil {
			s.refuseInvalid(w, r, &records.FieldError{Field: "payload", Rule: err.Error()})
			return
		}
		t.Payload = make(map[string]any, len(m))
		for k, v := range m {
			t.Payload[k] = v
		}
	}
	rc, st, err := c.FinishRun(r.Context(), req.Thread, r.PathValue("run"), req.Actor, t, req.Replayed)
	if err != nil {
		s.failRun(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, finishRunResponse{ID: rc.ID.String(), Clock: rc.Clock, Status: string(st)})
}

// failRun answers an error of a run: a stored record that does not
// verify, or a checkpoint that cannot be resumed from, is 500, counted.
func (s *Server) failRun(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, records.ErrCorrupt) || errors.Is(err, sdk.ErrCheckpointCorrupt) {
		s.m.corrupt.WithLabelValues("run").Inc()
		err = errors.Join(err, records.ErrCorrupt)
	}
	s.fail(w, r, err)
}
