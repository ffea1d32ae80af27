package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/wire"
)

// TestTailBadThread checks that a tail of a thread no record can have is
// refused with 400 naming the field, not streamed.
func TestTailBadThread(t *testing.T) {
	s := start(t, Config{})
	client := &http.Client{Timeout: 10 * time.Second, Transport: authTransport{http.DefaultTransport}} // a stream would never end
	resp, err := client.Get(base(s) + "/v1/threads/" + strings.Repeat("a", 257) + "/events")
	if err != nil {
		t.Fatalf("GET events: %v", err)
	}
	defer resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusBadRequest; got != want {
		t.Fatalf("code=%d, want %d", got, want)
	}
	var e wire.Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got, want := e.Field, "thread"; got != want {
		t.Fatalf("field=%q, want %q (%+v)", got, want, e)
	}
}
