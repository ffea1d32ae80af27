package serve

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// sessionRoutes adds the session routes: the listing by status, one
// thread's session, pause and resume. Every rule is sdk's.
func (s *Server) sessionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	mux.HandleFunc("GET /v1/threads/{thread}/session", s.handleSession)
	mux.HandleFunc("POST /v1/threads/{thread}/pause", s.handlePause)
	mux.HandleFunc("POST /v1/threads/{thread}/resume", s.handleResume)
}

// handleSessions answers GET /v1/sessions?status=S&resumable=true&offset=K&limit=N.
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	q := r.URL.Query()
	limit, err1 := uintParam(q, "limit", defaultLimit, 0, maxLimit)
	offset, err2 := uintParam(q, "offset", 0, 0, maxClock)
	if err := cmp.Or(err1, err2); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	f := sdk.SessionFilter{Status: q["status"], Resumable: q.Get("resumable") == "true", Offset: int(offset), Limit: int(limit)}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	f.Fresh = true
	ss, err := l.Sessions(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.Sessions{Sessions: make([]wire.Session, len(ss)), Total: len(ss)}
	for i, se := range ss {
		out.Sessions[i] = se.Wire()
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSession answers GET /v1/threads/{thread}/session: the thread's
// session as the listing shows it, with its status and whether it is one
// to resume, as the service layer says; 404 when the thread holds none.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	se, err := l.Session(ctx, r.PathValue("thread"), sdk.Freshness{Fresh: true})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, se.Wire())
}

// pauseRequest is the body of POST /v1/threads/{thread}/pause.
type pauseRequest struct {
	Actor       string   `json:"actor"`
	Depth       int      `json:"depth"`
	BudgetSpent float64  `json:"budgetSpent"`
	Rounds      uint64   `json:"rounds"`
	ElapsedMs   int64    `json:"elapsedMs"`
	Agents      []string `json:"agents"`
	Reason      string   `json:"reason"`
	Node        string   `json:"node"`
	SessionID   string   `json:"sessionId"`
	// PendingDelegations are the delegations in flight, each an object;
	// absent: those the transcript leaves unanswered.
	PendingDelegations []json.RawMessage `json:"pendingDelegations"`
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	var req pauseRequest
	if !s.readOptional(w, r, &req) {
		return
	}
	elapsed, err := sdk.Milliseconds("elapsedMs", req.ElapsedMs)
	if err != nil {
		s.refuseInvalid(w, r, err)
		return
	}
	o := sdk.PauseOptions{
		SessionID: req.SessionID, Depth: req.Depth, BudgetSpent: req.BudgetSpent, Rounds: req.Rounds,
		Elapsed: elapsed, Agents: req.Agents, Reason: req.Reason, Node: req.Node,
	}
	if req.PendingDelegations != nil {
		o.PendingDelegations = make([]any, len(req.PendingDelegations))
		for i, d := range req.PendingDelegations {
			if o.PendingDelegations[i], err = records.ValueFromJSON(d, fmt.Sprintf("pendingDelegations[%d]", i)); err != nil {
				s.refuseInvalid(w, r, err)
				return
			}
		}
	}
	p, err := l.PauseSession(r.Context(), r.PathValue("thread"), req.Actor, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := p.Wire()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, j)
}

// resumeRequest is the body of POST /v1/threads/{thread}/resume.
type resumeRequest struct {
	Actor string          `json:"actor"`
	From  string          `json:"from"`
	Set   json.RawMessage `json:"set"`
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	var req resumeRequest
	if !s.readOptional(w, r, &req) {
		return
	}
	o := sdk.ResumeOptions{Ref: req.From}
	if len(req.Set) > 0 {
		var err error
		if o.Set, err = records.MapFromJSON(req.Set, "set"); err != nil {
			s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: fmt.Sprintf("set: %v", err), Field: "set", Rule: "a JSON object"})
			return
		}
	}
	rc, err := l.ResumeSession(r.Context(), r.PathValue("thread"), req.Actor, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := rc.Wire()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}
