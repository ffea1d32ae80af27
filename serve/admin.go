package serve

import (
	"cmp"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// Routes the SDKs in other languages need (docs/http-api.yaml): a record
// by id, as JSON or as its stored bytes; erasure; pins; retention
// policies; the latest checkpoint of every thread. Thin faces over sdk.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/records/{id}", s.handleRecord)
	mux.HandleFunc("POST /v1/threads/{thread}/erase", s.handleErase)
	mux.HandleFunc("POST /v1/threads/{thread}/pins", s.handlePin)
	mux.HandleFunc("GET /v1/retention", s.handleRetention)
	mux.HandleFunc("PUT /v1/retention", s.handleSetRetention)
	mux.HandleFunc("DELETE /v1/retention", s.handleClearRetention)
	mux.HandleFunc("GET /v1/checkpoints/latest", s.handleLatestCheckpoints)
}

// CBOR is the media type of a record's stored bytes.
const mediaCBOR = "application/cbor"

// handleRecord answers GET /v1/records/{id}?thread=T: the record,
// verified, as JSON, or with Accept: application/cbor as its stored bytes
// (the canonical CBOR envelope records.Marshal gives, from which its id
// and body digest can be checked), its id in the Spl-Id header and its
// clock in Spl-Clock. Without thread the whole log is searched.
func (s *Server) handleRecord(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	id, err := records.ParseID(r.PathValue("id"))
	if err != nil {
		s.refuse(w, http.StatusBadRequest, "bad_param", wire.Error{Error: "id: " + err.Error(), Field: "id", Rule: "must be a record id (CID text)"})
		return
	}
	thread := r.URL.Query().Get("thread")
	if err := optional(records.CheckThread, thread); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	rec, err := l.Record(r.Context(), id, thread)
	if err != nil {
		if errors.Is(err, records.ErrCorrupt) {
			s.m.corrupt.WithLabelValues("record").Inc()
		}
		s.fail(w, r, err)
		return
	}
	if !acceptsCBOR(r) {
		j, err := newRecordJSON(rec)
		if err == nil {
			err = addEnvelope(&j, rec, wantEnvelope(r))
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
		return
	}
	data, err := rec.Record.Marshal()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", mediaCBOR)
	h.Set("Spl-Id", rec.ID.String())
	h.Set("Spl-Clock", strconv.FormatUint(rec.Clock, 10))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// acceptsCBOR reports whether the request's Accept header names
// application/cbor.
func acceptsCBOR(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == mediaCBOR {
			return true
		}
	}
	return false
}

// eraseRequest is the body of POST /v1/threads/{thread}/erase.
type eraseRequest struct {
	IDs    []string `json:"ids"`
	All    bool     `json:"all"` // every record of the thread but its erasure records
	Reason string   `json:"reason"`
	Actor  string   `json:"actor"`
}

func (s *Server) handleErase(w http.ResponseWriter, r *http.Request) {
	var req eraseRequest
	l, thread, ok := s.threadRequest(w, r, &req)
	if !ok {
		return
	}
	var res sdk.EraseResult
	var err error
	switch {
	case req.All && len(req.IDs) > 0:
		s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: "ids: not with all", Field: "ids", Rule: "give ids or all, not both"})
		return
	case req.All:
		res, err = l.EraseThread(r.Context(), thread, req.Actor, req.Reason)
	default:
		ids := make([]records.ID, len(req.IDs))
		for i, t := range req.IDs {
			if ids[i], err = records.ParseID(t); err != nil {
				field := fmt.Sprintf("ids[%d]", i)
				s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: field + ": " + err.Error(), Field: field, Rule: "must be a record id (CID text)"})
				return
			}
		}
		res, err = l.Erase(r.Context(), thread, req.Actor, ids, req.Reason)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res.Wire(thread))
}

// pinRequest is the body of POST /v1/threads/{thread}/pins.
type pinRequest struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Actor  string `json:"actor"`
}

func (s *Server) handlePin(w http.ResponseWriter, r *http.Request) {
	var req pinRequest
	l, thread, ok := s.threadRequest(w, r, &req)
	if !ok {
		return
	}
	id, err := records.ParseID(req.ID)
	if err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: "id: " + err.Error(), Field: "id", Rule: "must be a record id (CID text)"})
		return
	}
	p, err := l.Pin(r.Context(), thread, req.Actor, id, req.Reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	code := http.StatusCreated
	if p.Already {
		code = http.StatusOK
	}
	writeJSON(w, code, p.Wire(id))
}

// retentionResponse is the answer of GET /v1/retention.
type retentionResponse struct {
	Policies []wire.RetentionPolicy `json:"policies"`
}

func (s *Server) handleRetention(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	ps, err := l.Retention(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := retentionResponse{Policies: make([]wire.RetentionPolicy, len(ps))}
	for i, p := range ps {
		out.Policies[i] = p.Wire()
	}
	writeJSON(w, http.StatusOK, out)
}

// retentionRequest is the body of PUT and DELETE /v1/retention.
type retentionRequest struct {
	Thread   string `json:"thread"`
	All      bool   `json:"all"`
	KeepLast int    `json:"keep_last"`
	MaxAgeMS int64  `json:"max_age_ms"`
	Actor    string `json:"actor"`
}

func (req retentionRequest) policy() (sdk.RetentionPolicy, error) {
	age, err := sdk.Milliseconds("max_age_ms", req.MaxAgeMS)
	return sdk.RetentionPolicy{Thread: req.Thread, All: req.All, KeepLast: req.KeepLast, MaxAge: age}, err
}

func (s *Server) handleSetRetention(w http.ResponseWriter, r *http.Request) {
	var req retentionRequest
	l, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	p, err := req.policy()
	if err != nil {
		s.refuseInvalid(w, r, err)
		return
	}
	rc, err := l.SetRetention(r.Context(), req.Actor, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.ID, p.Clock, p.Actor = rc.ID, rc.Clock, req.Actor
	writeJSON(w, http.StatusCreated, p.Wire())
}

func (s *Server) handleClearRetention(w http.ResponseWriter, r *http.Request) {
	var req retentionRequest
	l, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	p := sdk.RetentionPolicy{Thread: req.Thread, All: req.All}
	res, err := l.ClearRetention(r.Context(), req.Actor, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	thread, _ := p.Home() // checked by ClearRetention
	writeJSON(w, http.StatusOK, res.Wire(thread))
}

// latestCheckpointsResponse is the answer of GET /v1/checkpoints/latest.
type latestCheckpointsResponse struct {
	Checkpoints []wire.LatestCheckpoint `json:"checkpoints"`
}

// handleLatestCheckpoints lists the latest checkpoint of every thread,
// newest first, as spl session list without --thread does:
// ?limit=&offset=&actor=&since=.
func (s *Server) handleLatestCheckpoints(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	q := r.URL.Query()
	limit, err1 := uintParam(q, "limit", 50, 1, maxLimit)
	offset, err2 := uintParam(q, "offset", 0, 0, maxClock)
	actor, err3 := filterParam(q, "actor")
	since, err4 := timeParam(q, "since")
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	cps, err := l.LatestCheckpoints(r.Context(), sdk.CheckpointPage{Actor: actor, Since: since, Offset: int(offset), Limit: int(limit), Freshness: sdk.Freshness{Fresh: true}})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := latestCheckpointsResponse{Checkpoints: make([]wire.LatestCheckpoint, len(cps))}
	for i, c := range cps {
		out.Checkpoints[i] = c.Wire()
	}
	writeJSON(w, http.StatusOK, out)
}
