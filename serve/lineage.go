package serve

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// Lineage routes of the HTTP API (docs/http-api.yaml): thin faces over
// sdk's lineage (sdk/lineage.go, fork.go, diff.go, prune.go).

// threadParam reads the {thread} of a request, answering 400 for a
// bad one.
func (s *Server) threadParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	thread := r.PathValue("thread")
	if err := records.CheckThread(thread); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return "", false
	}
	return thread, true
}

// readRequest reads a JSON request body into v, strictly (decodeStrict),
// answering what is wrong: 413 past Config.MaxBody, else 400.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	return s.decodeRequest(w, r, v, false)
}

// readOptional is readRequest for a request whose every field is
// optional: an empty body is {}.
func (s *Server) readOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	return s.decodeRequest(w, r, v, true)
}

// readBody reads the request's body, at most Config.MaxBody bytes: a
// longer one is refused with 413 and tooLarge's error, one that cannot be
// read with 400.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, tooLarge func(limit int64) wire.Error) ([]byte, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.refuse(w, http.StatusRequestEntityTooLarge, "too_large", tooLarge(mbe.Limit))
			return nil, false
		}
		s.refuse(w, http.StatusBadRequest, "bad_json", wire.Error{Error: "read request: " + err.Error()})
		return nil, false
	}
	return data, true
}

func (s *Server) decodeRequest(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	data, ok := s.readBody(w, r, func(limit int64) wire.Error {
		return wire.Error{Error: fmt.Sprintf("request body over %d bytes", limit), Field: "body", Rule: fmt.Sprintf("at most %d bytes", limit)}
	})
	if !ok {
		return false
	}
	if len(data) == 0 && emptyOK {
		data = []byte("{}")
	}
	if e, ok := decodeStrict(data, v); !ok {
		s.refuse(w, http.StatusBadRequest, "bad_json", e)
		return false
	}
	return true
}

// bodyRequest is the start of a write request with a JSON body: the
// service layer (503 when there is none yet) and the body decoded into
// req.
func (s *Server) bodyRequest(w http.ResponseWriter, r *http.Request, req any) (*sdk.Client, bool) {
	l := s.liveLog(w)
	if l == nil || !s.readRequest(w, r, req) {
		return nil, false
	}
	return l, true
}

// threadRequest is the start of a request on /v1/threads/{thread}/…: the
// service layer (503 when there is none yet), the thread (400 for a bad
// one) and, when req is not nil, the JSON body decoded into it.
func (s *Server) threadRequest(w http.ResponseWriter, r *http.Request, req any) (*sdk.Client, string, bool) {
	l := s.liveLog(w)
	if l == nil {
		return nil, "", false
	}
	thread, ok := s.threadParam(w, r)
	if !ok || req != nil && !s.readRequest(w, r, req) {
		return nil, "", false
	}
	return l, thread, true
}

// checkpointsResponse is the answer of GET /v1/threads/{thread}/checkpoints.
type checkpointsResponse struct {
	Thread      string                   `json:"thread"`
	Checkpoints []wire.CheckpointListing `json:"checkpoints"`
	Skipped     []uint64                 `json:"skipped,omitempty"` // clocks of checkpoints that do not verify, passed over
}

func (s *Server) handleCheckpoints(w http.ResponseWriter, r *http.Request) {
	l, thread, ok := s.threadRequest(w, r, nil)
	if !ok {
		return
	}
	limit, err := uintParam(r.URL.Query(), "limit", 50, 0, maxLimit)
	if err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	cps, err := l.ListCheckpoints(r.Context(), thread, int(limit))
	skipped, ok := sdk.Skipped(err)
	if !ok {
		s.fail(w, r, err)
		return
	}
	resp := checkpointsResponse{Thread: thread, Checkpoints: []wire.CheckpointListing{}, Skipped: skipped}
	for _, cp := range cps {
		j, err := cp.Listing()
		if err == nil {
			err = addEnvelope(&j.Record, cp.Record, wantEnvelope(r))
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		resp.Checkpoints = append(resp.Checkpoints, j)
	}
	writeJSON(w, http.StatusOK, resp)
}

// checkpointByRef answers GET /v1/threads/{thread}/checkpoint?id=|name=.
func (s *Server) checkpointByRef(w http.ResponseWriter, r *http.Request, l *sdk.Client, thread string) {
	q := r.URL.Query()
	id, name := q.Get("id"), q.Get("name")
	var (
		sc  sdk.SavedCheckpoint
		err error
	)
	switch {
	case id != "" && name != "":
		err = &ConfigError{Field: "id", Rule: "give id or name, not both"}
	case name != "":
		sc, err = l.CheckpointByName(r.Context(), thread, name)
	default:
		var full records.ID
		if full, err = records.ParseID(id); err == nil {
			sc, err = l.CheckpointByID(r.Context(), thread, full)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := sc.Wire()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) handleLineage(w http.ResponseWriter, r *http.Request) {
	l, thread, ok := s.threadRequest(w, r, nil)
	if !ok {
		return
	}
	lin, err := l.Lineage(r.Context(), thread)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lin.Wire())
}

// forkRequest is the body of POST /v1/threads/{thread}/fork.
type forkRequest struct {
	From  string                     `json:"from"`
	To    string                     `json:"to"`
	Actor string                     `json:"actor"`
	Set   map[string]json.RawMessage `json:"set"`
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req forkRequest
	l, thread, ok := s.threadRequest(w, r, &req)
	if !ok {
		return
	}
	if req.Actor == "" {
		s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: "actor: required", Field: "actor", Rule: "required: a DID"})
		return
	}
	set, err := sdk.StateSets(req.Set)
	if err != nil {
		s.refuseInvalid(w, r, err)
		return
	}
	f, err := l.Fork(r.Context(), thread, sdk.ForkRequest{From: req.From, To: req.To, Actor: req.Actor, Set: set})
	if err != nil && f.Checkpoint.Record.Record == nil {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		s.logger.Warn("fork note failed", "thread", thread, "err", err)
	}
	j, err := f.Wire()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, j)
}

func (s *Server) handleDiff(w http.ResponseWriter, r *http.Request) {
	l, thread, ok := s.threadRequest(w, r, nil)
	if !ok {
		return
	}
	q := r.URL.Query()
	a, err1 := filterParam(q, "a")
	b, err2 := filterParam(q, "b")
	bThread, err3 := filterParam(q, "b_thread")
	if err := cmp.Or(err1, err2, err3, optional(records.CheckThread, bThread)); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	d, err := l.DiffRefs(r.Context(), thread, a, bThread, b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d.Wire())
}

// pruneRequest is the body of POST /v1/threads/{thread}/prune.
type pruneRequest struct {
	OlderThanMS   int64  `json:"older_than_ms"`
	KeepLast      int    `json:"keep_last"`
	KeepCleanOnly bool   `json:"keep_clean_only"`
	DryRun        bool   `json:"dry_run"`
	Actor         string `json:"actor"`
}

func (s *Server) handlePrune(w http.ResponseWriter, r *http.Request) {
	var req pruneRequest
	l, thread, ok := s.threadRequest(w, r, &req)
	if !ok {
		return
	}
	if req.Actor == "" && !req.DryRun {
		s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: "actor: required", Field: "actor", Rule: "required: a DID"})
		return
	}
	olderThan, err := sdk.Milliseconds("older_than_ms", req.OlderThanMS)
	if err != nil {
		s.refuseInvalid(w, r, err)
		return
	}
	res, err := l.Prune(r.Context(), thread, sdk.PruneOptions{
		OlderThan: olderThan, KeepLast: req.KeepLast,
		KeepCleanOnly: req.KeepCleanOnly, DryRun: req.DryRun, Actor: req.Actor,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res.Wire())
}
