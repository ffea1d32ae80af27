package serve

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// Limits of the HTTP API.
const (
	defaultLimit = 1000      // records of one query page, threads of one list
	maxLimit     = 10000     // records of one query page, threads of one list, at most
	maxClock     = 1<<63 - 1 // the largest clock a query names
)

// routes is the HTTP API. docs/http-api.yaml describes it.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/records", s.handleEmit)
	mux.HandleFunc("POST /v1/records/batch", s.handleBatch)
	mux.HandleFunc("GET /v1/threads", s.handleThreads)
	mux.HandleFunc("GET /v1/threads/{thread}/records", s.handleQuery)
	mux.HandleFunc("GET /v1/threads/{thread}/checkpoint", s.handleCheckpoint)
	mux.HandleFunc("GET /v1/threads/{thread}/events", s.handleTail)
	mux.HandleFunc("GET /v1/events", s.handleTailAll)
	s.sessionRoutes(mux)
	mux.HandleFunc("GET /v1/threads/{thread}/checkpoints", s.handleCheckpoints)
	mux.HandleFunc("GET /v1/threads/{thread}/lineage", s.handleLineage)
	mux.HandleFunc("GET /v1/threads/{thread}/diff", s.handleDiff)
	mux.HandleFunc("POST /v1/threads/{thread}/fork", s.handleFork)
	mux.HandleFunc("POST /v1/threads/{thread}/prune", s.handlePrune)
	s.runRoutes(mux)
	s.mcpRoutes(mux)
	s.adminRoutes(mux)
	s.pageRoutes(mux) // the reviewer's page and its login (page.go, login.go)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	return s.instrument(jsonMux{mux})
}

// jsonMux is a ServeMux whose own answers are JSON error answers, as every
// error answer of the API is: 404 for a path no route has, 405 (with the
// Allow header) for a method the route does not take. The mux's other
// answers, such as the redirect of a path to its clean form
// (/v1/threads//records), become 404 too: no route answers them.
type jsonMux struct{ *http.ServeMux }

func (m jsonMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, route := m.Handler(r); route != "" {
		m.ServeMux.ServeHTTP(w, r)
		return
	}
	// No route: let the mux answer into a recorder to learn why (it sets
	// Allow when the path has routes for other methods), then answer JSON.
	rec := &headerRecorder{h: make(http.Header)}
	m.ServeMux.ServeHTTP(rec, r)
	if rec.code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.h.Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, wire.Error{
			Error: fmt.Sprintf("method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, rec.h.Get("Allow"))})
		return
	}
	writeJSON(w, http.StatusNotFound, wire.Error{Error: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

// headerRecorder keeps the status code and headers of an answer and
// drops its body.
type headerRecorder struct {
	h    http.Header
	code int
}

func (r *headerRecorder) Header() http.Header { return r.h }

func (r *headerRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *headerRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (SSE flushes).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts requests by route pattern and code, and logs them.
func (s *Server) instrument(next jsonMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		_, route := next.Handler(r)
		if route == "" {
			route = "unmatched"
		}
		if s.cfg.IdleExit > 0 {
			defer s.idle.used()()
		}
		next.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		d := time.Since(start)
		s.m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		if !strings.HasSuffix(route, "/events") {
			s.m.reqSeconds.WithLabelValues(route).Observe(d.Seconds())
		}
		level := slogLevel(sw.code)
		s.logger.Log(r.Context(), level, "http", "method", r.Method, "path", r.URL.Path,
			"route", route, "code", sw.code, "duration", d, "remote", r.RemoteAddr)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":%q}`+"\n", "encode response: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail answers err with the status and error classify gives it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, e := s.classify(r, err)
	if code == http.StatusServiceUnavailable {
		s.logger.Warn("storage unavailable", "path", r.URL.Path, "err", err)
	}
	writeJSON(w, code, e)
}

// classify maps err to the answer of the API, the one mapping of every
// route and of each item of a batch: 400 for invalid input (naming field
// and rule; no actor is a 400 on actor), 403 for a write that needs the
// admin right, 404 not found, 409 for a conflict, a record that cannot be
// erased or a session that cannot be resumed, 507 when the disk is full
// (the write was not stored, unless the error says its outcome is
// unknown), 503 when storage is unavailable, 500 for a stored record that
// does not verify.
func (s *Server) classify(r *http.Request, err error) (int, wire.Error) {
	var fe *records.FieldError
	var ce *ConfigError // a bad query parameter
	var tm *sdk.ThreadMovedError
	var rc *sdk.RunCancelledError
	var em *sdk.EffectMismatchError
	switch {
	case errors.As(err, &rc):
		return http.StatusConflict, wire.Error{Error: err.Error(), Code: wire.ErrorRunCancelled,
			Cancel: &wire.RunCancel{Reason: rc.Reason, Actor: rc.Actor, Request: rc.Request.ID.String(), Clock: rc.Request.Clock}}
	case errors.Is(err, sdk.ErrRunCancelled):
		return http.StatusConflict, wire.Error{Error: err.Error(), Code: wire.ErrorRunCancelled}
	case errors.As(err, &em):
		return http.StatusConflict, wire.Error{Error: err.Error(), Code: wire.ErrorEffectMismatch, Field: "args",
			Rule: "the input recorded for this call_id; rerun runs the tool again", Recorded: em.Recorded, Got: em.Got, RecordedTool: em.RecordedTool}
	case errors.Is(err, sdk.ErrRunFinished):
		return http.StatusConflict, wire.Error{Error: err.Error(), Code: wire.ErrorRunFinished}
	case errors.Is(err, sdk.ErrNotWaiting):
		return http.StatusConflict, wire.Error{Error: err.Error(), Code: wire.ErrorRunNotWaiting}
	case errors.As(err, &tm):
		return http.StatusConflict, wire.Error{Error: err.Error(), Field: "expected_clock",
			Rule: fmt.Sprintf("the clock of the thread's newest record: %d", tm.Current), Clock: &tm.Current}
	case errors.Is(err, records.ErrCorrupt):
		// Before the field errors: a stored message that does not verify
		// may wrap the field error of its damaged part.
		s.logger.Error("corrupt record", "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, wire.Error{Error: err.Error()}
	case errors.Is(err, sdk.ErrTooLarge) && errors.As(err, &fe):
		return http.StatusRequestEntityTooLarge, wire.Error{Error: err.Error(), Field: fe.Field, Rule: fe.Rule}
	case errors.As(err, &fe):
		return http.StatusBadRequest, wire.Error{Error: err.Error(), Field: fe.Field, Rule: fe.Rule}
	case errors.As(err, &ce):
		return http.StatusBadRequest, wire.Error{Error: ce.Field + ": " + ce.Rule, Field: ce.Field, Rule: ce.Rule}
	case errors.Is(err, records.ErrInvalid):
		return http.StatusBadRequest, wire.Error{Error: err.Error()}
	case errors.Is(err, sdk.ErrNoActor):
		// The service layer's words name the Go option; a request names
		// its actor in its body.
		return http.StatusBadRequest, wire.Error{Error: "actor: required: name the writer in the request's actor field (a DID such as did:sync:agent:dev); this server has no actor of its own",
			Field: "actor", Rule: "required: a DID such as did:sync:agent:dev"}
	case errors.Is(err, sdk.ErrNotFound), errors.Is(err, sdk.ErrNotSession):
		return http.StatusNotFound, wire.Error{Error: err.Error()}
	case errors.Is(err, sdk.ErrNeedsAdmin):
		return http.StatusForbidden, wire.Error{Error: err.Error(), Field: "Authorization", Rule: "needs the admin right"}
	case errors.Is(err, sdk.ErrConflict), errors.Is(err, sdk.ErrNotErasable),
		errors.Is(err, sdk.ErrSessionCompleted), errors.Is(err, sdk.ErrNotResumable), errors.Is(err, sdk.ErrNoResumePoint),
		errors.Is(err, sdk.ErrRunFinished):
		return http.StatusConflict, wire.Error{Error: err.Error()}
	case errors.Is(err, sdk.ErrDiskFull):
		return http.StatusInsufficientStorage, wire.Error{Error: err.Error(), Code: wire.ErrorDiskFull}
	default:
		// Timeouts, a closed log, a server without quorum, in-doubt
		// appends: storage is unavailable for now (logged once a
		// request: fail, handleBatch).
		return http.StatusServiceUnavailable, wire.Error{Error: err.Error()}
	}
}

// refuseInvalid answers a request whose field the server refused before
// it reached the log (err names the field and the rule), and counts it.
func (s *Server) refuseInvalid(w http.ResponseWriter, r *http.Request, err error) {
	s.m.refused.WithLabelValues("invalid").Inc()
	s.fail(w, r, err)
}

// refuse answers a request refused before it reached the log, and counts it.
func (s *Server) refuse(w http.ResponseWriter, code int, reason string, e wire.Error) {
	s.m.refused.WithLabelValues(reason).Inc()
	writeJSON(w, code, e)
}

// liveLog returns the service layer, or answers 503 when there is none to
// use.
func (s *Server) liveLog(w http.ResponseWriter) *sdk.Client {
	if s.stopping.Load() {
		s.refuse(w, http.StatusServiceUnavailable, "stopping", wire.Error{Error: "server is shutting down"})
		return nil
	}
	l := s.c.Load()
	if l == nil {
		s.refuse(w, http.StatusServiceUnavailable, "not_ready", wire.Error{Error: "log not open yet (a cluster waits for its peers)"})
		return nil
	}
	return l
}

// emitRequest is the body of POST /v1/records.
type emitRequest struct {
	Thread string          `json:"thread"`
	Act    string          `json:"act"`
	Kind   string          `json:"kind"`
	Actor  string          `json:"actor"`
	TS     *int64          `json:"ts"`
	Body   json.RawMessage `json:"body"`
	// ExpectedClock makes the append conditional: it lands only while the
	// thread's newest record is at this clock (0: the thread has none),
	// else 409 with the clock it is at (sdk.Client.AppendEventIf).
	ExpectedClock *uint64 `json:"expected_clock"`

	// A record its author signed (docs/http-api.md, "Signed records"):
	// the standard base64 of the Ed25519 signature over the record's
	// signing id, of its 32-byte salt, and optionally the did:key that
	// signed (default: the actor's key). ts is required with them.
	Signature string `json:"signature"`
	Salt      string `json:"salt"`
	Key       string `json:"key"`
}

// signed returns the salt and signature of a signed request; none when
// the request carries neither.
func (req emitRequest) signed() ([]byte, *records.Signature, error) {
	if req.Signature == "" && req.Salt == "" && req.Key == "" {
		return nil, nil, nil
	}
	if req.Signature == "" {
		return nil, nil, &records.FieldError{Field: "signature", Rule: "required with salt or key"}
	}
	sig, err := records.DecodeSignature(req.Signature)
	if err != nil {
		return nil, nil, &records.FieldError{Field: "signature", Rule: "must be the standard base64 of a 64-byte Ed25519 signature"}
	}
	s := &records.Signature{Sig: sig}
	if req.Key != "" {
		if s.Key, err = records.ParseDIDKey(req.Key); err != nil {
			return nil, nil, &records.FieldError{Field: "key", Rule: "must be the did:key of an Ed25519 key (did:key:z6Mk…)"}
		}
	}
	salt, err := base64.StdEncoding.DecodeString(req.Salt)
	if err != nil || len(salt) != records.SaltSize {
		return nil, nil, &records.FieldError{Field: "salt", Rule: fmt.Sprintf("required with signature: the standard base64 of the record's %d-byte salt", records.SaltSize)}
	}
	return salt, s, nil
}

// emitEvent reads an emit request as POST /v1/records and each item of
// POST /v1/records/batch take it (the body's strict JSON, the signature's
// encodings), counting what it refuses, and returns the event for the
// service layer, which builds, checks and seals the record.
func (s *Server) emitEvent(req *emitRequest) (sdk.Event, error) {
	refused := func(err error) (sdk.Event, error) {
		s.m.refused.WithLabelValues("invalid").Inc()
		return sdk.Event{}, err
	}
	if len(req.Body) == 0 {
		return refused(&records.FieldError{Field: "body", Rule: "required: a JSON object"})
	}
	body, err := records.BodyFromJSON(req.Body)
	if err != nil {
		return refused(err)
	}
	salt, sig, err := req.signed()
	if err != nil {
		return refused(err)
	}
	// The service layer builds the record once, and checks it: its
	// fields, the signature's salt and time (sdk.Client.AppendEvent).
	ev := sdk.Event{Act: req.Act, Kind: req.Kind, Thread: req.Thread, Actor: req.Actor,
		Body: records.RawBody(body), Salt: salt, Signature: sig}
	if req.TS != nil {
		ev.Time = time.UnixMilli(*req.TS)
	}
	return ev, nil
}

// appendFailed counts an append the service layer refused or could not
// make: an invalid record is refused input too.
func (s *Server) appendFailed(err error) {
	res := appendResult(err)
	s.m.appends.WithLabelValues(res).Inc()
	if res == "invalid" {
		s.m.refused.WithLabelValues("invalid").Inc()
	}
}

func (s *Server) handleEmit(w http.ResponseWriter, r *http.Request) {
	var req emitRequest
	l, ok := s.bodyRequest(w, r, &req)
	if !ok {
		return
	}
	ev, err := s.emitEvent(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	start := time.Now()
	var rc sdk.Record
	if req.ExpectedClock != nil {
		rc, err = l.AppendEventIf(r.Context(), ev, *req.ExpectedClock)
	} else {
		rc, err = l.AppendEvent(r.Context(), ev)
	}
	res := s.appended(r, rc, err, time.Since(start))
	if res.Record == nil {
		if res.Status == http.StatusServiceUnavailable {
			s.logger.Warn("storage unavailable", "path", r.URL.Path, "err", err)
		}
		writeJSON(w, res.Status, wire.Error{Error: res.Error, Field: res.Field, Rule: res.Rule, Clock: res.Clock})
		return
	}
	writeJSON(w, http.StatusCreated, res.Record)
}

// appended counts one append the service layer made (in took) or could
// not make, and is its answer: 201 with the stored record (also when only
// the retention after it failed: the record is stored, and the next
// checkpoint or retention apply erases what this one could not), or the
// failure. The one outcome of POST /v1/records and of each item of a
// batch.
func (s *Server) appended(r *http.Request, rc sdk.Record, err error, took time.Duration) batchResult {
	var re *sdk.RetentionError
	if err != nil && !errors.As(err, &re) {
		s.appendFailed(err)
		return s.failure(r, fmt.Errorf("append: %w", err))
	}
	s.m.appendSecs.Observe(took.Seconds())
	s.m.appends.WithLabelValues("ok").Inc()
	if re != nil {
		s.logger.Warn("retention after an append failed", "thread", re.Thread, "err", re.Err)
	}
	j, err := newRecordJSON(rc)
	if err != nil {
		return s.failure(r, err)
	}
	return batchResult{Status: http.StatusCreated, Record: &j}
}

func appendResult(err error) string {
	switch {
	case errors.Is(err, records.ErrInvalid):
		return "invalid"
	case errors.Is(err, sdk.ErrConflict):
		return "conflict"
	case errors.Is(err, sdk.ErrInDoubt), errors.Is(err, sdk.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	}
	return "error"
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data, and says what was wrong. It refuses too what
// encoding/json would silently change (records.CheckJSON: duplicate keys,
// invalid UTF-8, lone surrogates, numbers not kept exactly; checkFieldNames:
// a field named in another case), naming the field.
func decodeStrict(data []byte, v any) (wire.Error, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		err = cmp.Or(records.CheckJSON(data, ""), checkFieldNames(data, v))
	}
	if err == nil {
		return wire.Error{}, true
	}
	var fe *records.FieldError
	if errors.As(err, &fe) {
		return wire.Error{Error: err.Error(), Field: fe.Field, Rule: fe.Rule}, false
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return wire.Error{Error: err.Error(), Field: te.Field, Rule: "must be " + jsonKind(te.Type.Kind().String())}, false
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return wire.Error{Error: err.Error(), Field: name, Rule: "unknown field"}, false
	}
	return wire.Error{Error: "request must be one JSON object: " + err.Error(), Rule: "request must be one JSON object"}, false
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int64", "int", "uint64":
		return "an integer"
	case "slice":
		return "a JSON object"
	}
	return "a " + k
}

// queryResponse is the answer of GET /v1/threads/{thread}/records.
type queryResponse struct {
	Thread  string         `json:"thread"`
	Records []wire.Record  `json:"records"`
	Corrupt []wire.Corrupt `json:"corrupt"`
	Next    *uint64        `json:"next"` // clock to continue from, null at the end
}

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	thread := r.PathValue("thread")
	q := r.URL.Query()
	kind, act := q.Get("kind"), q.Get("act")
	from, err1 := uintParam(q, "from", 0, 0, maxClock)
	last, err2 := uintParam(q, "last", 0, 0, maxLimit)
	limit, err3 := uintParam(q, "limit", defaultLimit, 1, maxLimit)
	// The first parameter that is wrong is answered, in path order.
	if err := cmp.Or(records.CheckThread(thread), optional(records.CheckKind, kind), optional(records.CheckAct, act), err1, err2, err3); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	var opts []sdk.QueryOption
	if from > 0 {
		opts = append(opts, sdk.FromClock(from))
	}
	if kind != "" {
		opts = append(opts, sdk.OfKind(kind))
	}
	if act != "" {
		opts = append(opts, sdk.OfAct(act))
	}
	resp := queryResponse{Thread: thread, Records: []wire.Record{}, Corrupt: []wire.Corrupt{}}
	env := wantEnvelope(r)
	add := func(e sdk.Record, err error) error {
		if err != nil {
			var ce *sdk.CorruptError
			if errors.As(err, &ce) {
				s.m.corrupt.WithLabelValues("query").Inc()
				resp.Corrupt = append(resp.Corrupt, wire.Corrupt{Clock: ce.Clock, Subject: ce.Subject, Reason: ce.Reason})
				return nil
			}
			return err
		}
		j, err := newRecordJSON(e)
		if err == nil {
			err = addEnvelope(&j, e, env)
		}
		if err != nil {
			return err
		}
		resp.Records = append(resp.Records, j)
		return nil
	}
	if last > 0 {
		for e, err := range l.QueryThread(r.Context(), thread, append(opts, sdk.Last(int(last)))...) {
			for _, err := range sdk.SplitErrors(err) {
				if err := add(e, err); err != nil {
					s.fail(w, r, err)
					return
				}
			}
			if err == nil {
				if err := add(e, nil); err != nil {
					s.fail(w, r, err)
					return
				}
			}
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	n := 0
	for e, err := range l.QueryThread(r.Context(), thread, opts...) {
		if err == nil && n == int(limit) {
			next := e.Clock
			resp.Next = &next
			break
		}
		if err := add(e, err); err != nil {
			s.fail(w, r, err)
			return
		}
		if err == nil {
			n++
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// uintParam parses an optional query parameter, def when absent, min to
// max when present.
func uintParam(q map[string][]string, name string, def, min, max uint64) (uint64, error) {
	v, ok := q[name]
	if !ok || len(v) == 0 || v[0] == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil || n < min || n > max {
		return 0, &ConfigError{Field: name, Rule: fmt.Sprintf("must be an integer from %d to %d, got %q", min, max, v[0])}
	}
	return n, nil
}

// optional applies check to a query parameter that may be absent (empty).
func optional(check func(string) error, value string) error {
	if value == "" {
		return nil
	}
	return check(value)
}

func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	thread := r.PathValue("thread")
	if err := records.CheckThread(thread); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	if q := r.URL.Query(); q.Has("id") || q.Has("name") {
		s.checkpointByRef(w, r, l, thread)
		return
	}
	e, err := l.Latest(r.Context(), thread, records.KindCheckpoint)
	if err != nil {
		if errors.Is(err, records.ErrCorrupt) {
			s.m.corrupt.WithLabelValues("checkpoint").Inc()
		}
		if errors.Is(err, sdk.ErrNotFound) {
			err = fmt.Errorf("no checkpoint on thread %q: %w", thread, err)
		}
		s.fail(w, r, err)
		return
	}
	j, err := newCheckpointJSON(e)
	if err == nil {
		err = addEnvelope(&j.Record, e, wantEnvelope(r))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// threadsResponse is the answer of GET /v1/threads.
type threadsResponse struct {
	Threads  []wire.Thread `json:"threads"`
	Total    uint64        `json:"total"`     // threads in the index
	AsOf     uint64        `json:"as_of"`     // every record up to this clock is reflected
	LogClock uint64        `json:"log_clock"` // the log's last clock when the request came
}

// handleThreads lists the threads of the thread index, newest activity
// first, as spl thread list does. It first waits, at most Config.ThreadsWait,
// until the index has applied the log's last clock, so that a thread
// appended just before is listed; past that it answers what the index has
// stored, and as_of says how far that goes.
func (s *Server) handleThreads(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	q := r.URL.Query()
	limit, err1 := uintParam(q, "limit", defaultLimit, 0, maxLimit)
	actor, err2 := filterParam(q, "actor")
	kind, err3 := filterParam(q, "kind")
	since, err4 := timeParam(q, "since")
	// The first parameter that is wrong is answered, in documented order.
	if err := cmp.Or(err1, err2, err3, optional(records.CheckKind, kind), err4); err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	page, err := l.ThreadIndexPage(ctx, sdk.ThreadFilter{Actor: actor, Kind: kind, Since: since, Limit: int(limit)}, limit == 0, s.cfg.ThreadsWait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := threadsResponse{Threads: make([]wire.Thread, len(page.Threads)), Total: page.Total, AsOf: page.AsOf, LogClock: page.LogClock}
	for i, t := range page.Threads {
		resp.Threads[i] = t.Wire()
	}
	writeJSON(w, http.StatusOK, resp)
}

// filterParam returns the value of an optional filter parameter, "" when
// absent. One given empty is refused: a filter left empty by mistake must
// not widen the answer to everything.
func filterParam(q url.Values, name string) (string, error) {
	v, ok := q[name]
	if !ok {
		return "", nil
	}
	if len(v) == 0 || v[0] == "" {
		return "", &ConfigError{Field: name, Rule: "must not be empty when given"}
	}
	return v[0], nil
}

// timeParam parses an optional RFC 3339 time parameter, the zero time when
// absent.
func timeParam(q url.Values, name string) (time.Time, error) {
	v, err := filterParam(q, name)
	if err != nil || v == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, &ConfigError{Field: name, Rule: fmt.Sprintf("must be an RFC 3339 time such as 2026-11-21T23:46:52Z, got %q", v)}
	}
	return t, nil
}

// healthJSON is the answer of GET /healthz.
type healthJSON struct {
	Status    string `json:"status"` // ok, starting, stopping, unavailable
	Stream    string `json:"stream,omitempty"`
	LastClock uint64 `json:"last_clock"`
	Error     string `json:"error,omitempty"`
	// Warnings are what an operator must know: authentication off.
	Warnings []string `json:"warnings,omitempty"`
	// Missing are the clocks lost, with status "loss": the stream is
	// behind its high-water mark.
	Missing *clockRange `json:"missing,omitempty"`
}

// clockRange is the clocks from From to To.
type clockRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	warn := s.warnings()
	if c := r.Header.Get(ChallengeHeader); c != "" && s.cfg.HTTPToken != "" {
		p, err := Proof(s.cfg.HTTPToken, c)
		if err != nil {
			s.refuse(w, http.StatusBadRequest, "invalid", wire.Error{Error: err.Error(), Field: ChallengeHeader, Rule: "32 to 128 hex digits"})
			return
		}
		w.Header().Set(ProofHeader, p)
	}
	switch l := s.c.Load(); {
	case s.stopping.Load():
		writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "stopping", Warnings: warn})
	case l == nil:
		writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "starting", Warnings: warn})
	default:
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		h := l.Health(ctx)
		switch {
		case h.Loss != nil:
			s.logger.Error("loss: the log is behind its high-water mark", "from", h.Loss.From, "to", h.Loss.To, "reason", h.Loss.Reason)
			writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: h.Status, Stream: l.StreamName(), LastClock: h.LastClock,
				Error: h.Err.Error(), Missing: &clockRange{From: h.Loss.From, To: h.Loss.To}, Warnings: warn})
		case !h.OK():
			s.logger.Error("unhealthy", "status", h.Status, "err", h.Err)
			writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: h.Status, Stream: l.StreamName(), LastClock: h.LastClock, Error: h.Err.Error(), Warnings: warn})
		default:
			writeJSON(w, http.StatusOK, healthJSON{Status: "ok", Stream: l.StreamName(), LastClock: h.LastClock, Warnings: warn})
		}
	}
}
