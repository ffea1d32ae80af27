package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNoRouteJSON checks that the answers of the router itself (no route,
// wrong method, a path the router would redirect) are JSON error answers,
// as docs/http-api.yaml says every error answer is, with Allow on a 405.
func TestNoRouteJSON(t *testing.T) {
	s := start(t, Config{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/v1/records", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/v1/threads/t/records", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/nothing", http.StatusNotFound, ""},
		{"GET", "/v1/threads//records", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequest(tt.method, base(s)+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		var e apiError
		derr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if got, want := resp.StatusCode, tt.code; got != want {
			t.Errorf("%s %s: code=%d, want %d", tt.method, tt.path, got, want)
		}
		if got, want := resp.Header.Get("Content-Type"), "application/json"; got != want {
			t.Errorf("%s %s: Content-Type=%q, want %q", tt.method, tt.path, got, want)
		}
		if derr != nil || e.Error == "" {
			t.Errorf("%s %s: body is not a JSON error answer (%v, %+v)", tt.method, tt.path, derr, e)
		}
		if got, want := resp.Header.Get("Allow"), tt.allow; got != want {
			t.Errorf("%s %s: Allow=%q, want %q", tt.method, tt.path, got, want)
		}
	}
}

// TestTailBadThread checks that a tail of a thread no record can have is
// refused with 400 naming the field, not streamed.
func TestTailBadThread(t *testing.T) {
	s := start(t, Config{})
	client := &http.Client{Timeout: 10 * time.Second} // a stream would never end
	resp, err := client.Get(base(s) + "/v1/threads/" + strings.Repeat("a", 257) + "/events")
	if err != nil {
		t.Fatalf("GET events: %v", err)
	}
	defer resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusBadRequest; got != want {
		t.Fatalf("code=%d, want %d", got, want)
	}
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got, want := e.Field, "thread"; got != want {
		t.Fatalf("field=%q, want %q (%+v)", got, want, e)
	}
}
