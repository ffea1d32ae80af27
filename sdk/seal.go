package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spl-dev/spl/records"
)

// The seal path. Every record a client writes passes here once, on its
// way to the log, whichever face or path built it (Append, and through it
// Emit, checkpoints, forks and spl serve; EmitAsync; runs and erasures
// through admit): the rules that
// make a record fit to store are applied in one place and in one order.
//
//  1. Redaction (redact.go): the redaction policies of the record's
//     thread take covered values out, before anything is stored. Kinds
//     core.* are not redacted. A run's records come in at step 3: the
//     policies of the thread the run is on are applied to the payload
//     before the record is built (redactBody), so that a covered value
//     reaches neither the log nor the blob store.
//  2. A record its author signed before it came here cannot be redacted:
//     the signature would not cover what is stored.
//  3. Who may write the record's thread (rights.go): under
//     WithBindingsByAdmin, the actor key bindings only for a caller with
//     the admin right.
//  4. Signing and authorization (actor.go): the client's key signs an
//     unsigned record; a bad or wrong-key signature, or under
//     WithRequireSigned an unsigned record, is refused.

// seal readies rec for the log (see above) and returns the record to
// append, which may be a new one: a redacted record is sealed anew from
// its body without the covered values (same header fields, a new salt).
func (c *Client) seal(ctx context.Context, rec *records.Record) (*records.Record, error) {
	out, err := c.redact(ctx, rec)
	if err != nil {
		return nil, err
	}
	if rec.Sig != nil && out != rec {
		return nil, &records.FieldError{Field: "signature", Rule: fmt.Sprintf("a redaction policy of thread %q removes values from this body, so the signature would not cover the stored record: leave the covered keys out, then sign", rec.Header.Thread)}
	}
	return c.admit(ctx, out)
}

// admit applies the last steps of the seal path to rec, final but for its
// signature: who may write its thread (mayWrite), then signing and
// authorization (authorize). Records whose body the policies have already
// been applied to come in here: erasure records, which the log builds,
// and a run's records, whose payload is redacted under the run's thread
// (redactBody) before the record is built around it, since a large one is
// stored beside the log.
func (c *Client) admit(ctx context.Context, rec *records.Record) (*records.Record, error) {
	if err := c.mayWrite(ctx, rec.Header.Thread); err != nil {
		return nil, err
	}
	return c.authorize(ctx, rec)
}

// redact applies the redaction policies of rec's thread to its body: when they cover a key of it, it returns a record sealed anew
// (same header fields, a new salt) from the body without the covered
// values and with the paths removed listed under "redacted"; else rec
// itself. The record given is never appended, so an excluded value never
// reaches the log.
func (c *Client) redact(ctx context.Context, rec *records.Record) (*records.Record, error) {
	h := &rec.Header
	if strings.HasPrefix(h.Kind, "core.") {
		return rec, nil
	}
	body, removed, err := c.redactBody(ctx, h.Thread, rec.Body)
	if err != nil || len(removed) == 0 {
		return rec, err
	}
	out, err := records.New(h.Act, h.Kind, h.Thread, h.Actor, time.UnixMilli(h.TS), records.RawBody(body))
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: redacted %s: %w", strings.Join(removed, ", "), err)
	}
	return out, nil
}
