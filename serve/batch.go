package serve

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// POST /v1/records/batch appends many records in one request: each item
// is what POST /v1/records takes, and gets the answer that route would
// give it (its status, and the record or the error). The items are handed
// to the service layer together (sdk.Client.AppendEvents), so they share
// group commits and the records of one thread are chained in the order of
// the request; an item that fails (invalid, refused, a lost race) fails
// alone. The SDKs send the emits their callers await at the same moment
// as one batch: one request, one parse and one answer for all of them.

// maxBatchRecords bounds the items of one batch: the log's writer commits
// at most this many records at once by default. The request's bytes are
// bounded by Config.MaxBody, as every request's are.
const maxBatchRecords = 1000

// batchResponse is the answer of POST /v1/records/batch: one result per
// item of the request, in its order.
type batchResponse struct {
	Results []batchResult `json:"results"`
}

// batchResult is the outcome of one item: the status POST /v1/records
// would have answered it, and the stored record (201) or the error.
type batchResult struct {
	Status int          `json:"status"`
	Record *wire.Record `json:"record,omitempty"`
	Error  string       `json:"error,omitempty"`
	Field  string       `json:"field,omitempty"`
	Rule   string       `json:"rule,omitempty"`
	Clock  *uint64      `json:"clock,omitempty"` // the thread's clock, for a refused conditional append
}

// errorResult is the result of an item refused with e.
func errorResult(code int, e wire.Error) batchResult {
	return batchResult{Status: code, Error: e.Error, Field: e.Field, Rule: e.Rule, Clock: e.Clock}
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	data, ok := s.readBody(w, r, func(limit int64) wire.Error {
		return wire.Error{Error: fmt.Sprintf("batch over %d bytes: send fewer records a request", limit),
			Field: "records", Rule: fmt.Sprintf("at most %d bytes a request", limit)}
	})
	if !ok {
		return
	}
	items, e, ok := decodeBatch(data)
	if !ok {
		s.refuse(w, http.StatusBadRequest, "bad_json", e)
		return
	}
	results := make([]batchResult, len(items))
	evs := make([]sdk.Event, 0, len(items))
	at := make([]int, 0, len(items)) // the item of each event
	for i, item := range items {
		ev, res, ok := s.batchEvent(r, item)
		if !ok {
			results[i] = res
			continue
		}
		evs = append(evs, ev)
		at = append(at, i)
	}
	start := time.Now()
	recs, errs := l.AppendEvents(r.Context(), evs)
	took := time.Since(start)
	unavailable := 0
	var first error
	for k, i := range at {
		results[i] = s.appended(r, recs[k], errs[k], took)
		if results[i].Status == http.StatusServiceUnavailable {
			unavailable++
			first = cmp.Or(first, errs[k])
		}
	}
	if unavailable > 0 {
		// Once a request, not once a record.
		s.logger.Warn("storage unavailable", "path", r.URL.Path, "records", unavailable, "err", first)
	}
	writeJSON(w, http.StatusOK, batchResponse{Results: results})
}

// decodeBatch reads the request {"records": [item, ...]} as strictly as
// decodeStrict reads a request, the items left as they are: each is
// checked alone, so that a bad one fails by itself.
func decodeBatch(data []byte) ([]json.RawMessage, wire.Error, bool) {
	bad := func(err error) ([]json.RawMessage, wire.Error, bool) {
		return nil, wire.Error{Error: "request must be one JSON object: " + err.Error(), Rule: "request must be one JSON object"}, false
	}
	rule := fmt.Sprintf("required: an array of 1 to %d records", maxBatchRecords)
	required := wire.Error{Error: "records: " + rule + ", each as POST /v1/records takes it", Field: "records", Rule: rule}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return bad(err)
	} else if tok != json.Delim('{') {
		return bad(fmt.Errorf("got %v", tok))
	}
	var items []json.RawMessage
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		switch key, _ := tok.(string); {
		case key != "records":
			return nil, wire.Error{Error: fmt.Sprintf("unknown field %q", key), Field: key, Rule: "unknown field (field names are case-sensitive)"}, false
		case seen:
			return nil, wire.Error{Error: `duplicate key "records"`, Field: "records", Rule: "duplicate key"}, false
		}
		seen = true
		if err := dec.Decode(&items); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, required, false
			}
			return bad(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(errors.New("data after the JSON object"))
	}
	switch {
	case len(items) == 0:
		return nil, required, false
	case len(items) > maxBatchRecords:
		r := fmt.Sprintf("at most %d records a batch", maxBatchRecords)
		return nil, wire.Error{Error: fmt.Sprintf("records: %d records: %s", len(items), r), Field: "records", Rule: r}, false
	}
	return items, wire.Error{}, true
}

// batchEvent reads one item as handleEmit reads its request, and answers
// (and counts) what that route would when the item is refused before the
// log.
func (s *Server) batchEvent(r *http.Request, item json.RawMessage) (sdk.Event, batchResult, bool) {
	var req emitRequest
	if e, ok := decodeStrict(item, &req); !ok {
		s.m.refused.WithLabelValues("bad_json").Inc()
		return sdk.Event{}, errorResult(http.StatusBadRequest, e), false
	}
	if req.ExpectedClock != nil {
		// Never ignored in silence: a batch's records land together.
		s.m.refused.WithLabelValues("invalid").Inc()
		return sdk.Event{}, errorResult(http.StatusBadRequest, wire.Error{Error: "expected_clock: not taken in a batch",
			Field: "expected_clock", Rule: "send a conditional append alone, to POST /v1/records"}), false
	}
	ev, err := s.emitEvent(&req)
	if err != nil {
		return sdk.Event{}, s.failure(r, err), false
	}
	return ev, batchResult{}, true
}

// failure is the result of an item that failed with err: the status and
// error it would have answered alone (classify).
func (s *Server) failure(r *http.Request, err error) batchResult {
	return errorResult(s.classify(r, err))
}
