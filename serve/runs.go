package serve

import (
	"errors"
	"net/http"

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
		if errors.Is(err, records.ErrCorrupt) || errors.Is(err, sdk.ErrCheckpointCorrupt) {
			s.m.corrupt.WithLabelValues("run").Inc()
			err = errors.Join(err, records.ErrCorrupt)
		}
		s.fail(w, r, err)
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

// runRoutes adds the routes of runs (docs/http-api.yaml).
func (s *Server) runRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/runs", s.handleRuns)
	mux.HandleFunc("GET /v1/runs/{run}", s.handleRun)
	mux.HandleFunc("POST /v1/runs/{run}/cancel", s.handleCancel)
}
