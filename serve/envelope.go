package serve

import (
	"fmt"
	"net/http"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// wantEnvelope reports whether a request asks for each record's stored
// bytes beside its JSON form (?envelope=true): the SDKs in other
// languages verify every record they read from them.
func wantEnvelope(r *http.Request) bool { return r.URL.Query().Get("envelope") == "true" }

// addEnvelope sets j.Envelope to e's stored bytes when want.
func addEnvelope(j *wire.Record, e sdk.Record, want bool) error {
	if !want || e.Record == nil {
		return nil
	}
	data, err := e.Record.Marshal()
	if err != nil {
		return fmt.Errorf("record %s: envelope: %w", e.ID, err)
	}
	j.Envelope = data
	return nil
}
