package serve

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// A face takes a session's status and whether to offer Resume from the
// API: GET /v1/threads/{thread}/session answers them as the service
// layer decides, and a resume the answer does not offer is refused.
func TestSessionSaysResumable(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	const thread = "th_sess"
	act := fmt.Sprintf(`{"actor":%q}`, actor)
	session := func() wire.Session {
		t.Helper()
		var se wire.Session
		if code := call(t, "GET", b+"/v1/threads/"+thread+"/session", "", &se); code != http.StatusOK {
			t.Fatalf("GET session: code=%d", code)
		}
		return se
	}
	var e wire.Error
	if code := call(t, "GET", b+"/v1/threads/"+thread+"/session", "", &e); code != http.StatusNotFound {
		t.Fatalf("GET the session of a thread without one: code=%d (%+v), want 404", code, e)
	}
	call(t, "POST", b+"/v1/records", emitBody(thread, "LEARN", records.KindCheckpoint, `{"summary":"s","learnings":["l"]}`), nil)
	if se := session(); se.Status != "running" || se.Resumable {
		t.Fatalf("after a checkpoint: %+v, want running, not resumable", se)
	}
	if code := call(t, "POST", b+"/v1/threads/"+thread+"/pause", act, nil); code != http.StatusCreated {
		t.Fatalf("pause: code=%d", code)
	}
	if se := session(); se.Status != "paused" || !se.Resumable {
		t.Fatalf("after a pause: %+v, want paused, resumable", se)
	}
	call(t, "POST", b+"/v1/records", emitBody(thread, "DO", records.KindSessionCompleted, `{"type":"session_completed"}`), nil)
	if se := session(); se.Status != "completed" || se.Resumable {
		t.Fatalf("after completion: %+v, want completed, not resumable", se)
	}
	if code := call(t, "POST", b+"/v1/threads/"+thread+"/resume", act, &e); code != http.StatusConflict {
		t.Fatalf("resume of a completed session: code=%d (%+v), want 409", code, e)
	}
}
