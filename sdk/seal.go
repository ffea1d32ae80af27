package sdk

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spl-dev/spl/records"
)

// The seal path. Every record a client writes passes here once, on its
// way to the log, whichever face or path built it (Append, and through it
// Emit, checkpoints and spl serve; EmitAsync; forks; runs): the rules that
// make a record fit to store are applied in one place and in one order.
//
//  1. Redaction (redact.go): the redaction policies of the policy thread
//     take covered values out, before anything is stored, so a covered
//     value reaches neither the log nor the blob store. Kinds core.* are
//     not redacted.
//  2. A record its author signed before it came here cannot be redacted:
//     the signature would not cover what is stored.
//  3. Who may write the record's thread (rights.go): under
//     WithBindingsByAdmin, the actor key bindings only for a caller with
//     the admin right.
//  4. Signing and authorization (actor.go): the client's key signs an
//     unsigned record; a bad or wrong-key signature, or under
//     WithRequireSigned an unsigned record, is refused.

// sealing is a record on its way to the log, as seal takes it.
type sealing struct {
	// rec is the record, when it is built before it is sealed.
	rec *records.Record
	// policy is the thread whose redaction policies hold; rec's thread
	// when empty. A run's records are on threads of their own, under the
	// policies of the thread the run is on.
	policy string
	// build, when set, makes the record around payload once the policies
	// have taken their values out of it (rec is then unused): for a run's
	// records, whose policies hold for the payload, not for the run's own
	// fields, and whose payload build may store beside the log. A run's
	// effect has no payload (its output is JSON text, which no policy
	// looks into): payload is nil and nothing is redacted.
	payload []byte
	build   func(payload []byte) (*records.Record, error)
}

// seal readies a record for the log (see above) and returns the record to
// append, which may be a new one: a redacted record is sealed anew from
// its body without the covered values (same header fields, a new salt).
func (c *Client) seal(ctx context.Context, s sealing) (*records.Record, error) {
	rec := s.rec
	if s.build != nil {
		payload := s.payload
		if payload != nil {
			var err error
			if payload, _, err = c.redactBody(ctx, s.policy, payload); err != nil {
				return nil, err
			}
		}
		var err error
		if rec, err = s.build(payload); err != nil {
			return nil, err
		}
	} else {
		out, err := c.redact(ctx, rec, cmp.Or(s.policy, rec.Header.Thread))
		if err != nil {
			return nil, err
		}
		if rec.Sig != nil && out != rec {
			return nil, &records.FieldError{Field: "signature", Rule: fmt.Sprintf("a redaction policy of thread %q removes values from this body, so the signature would not cover the stored record: leave the covered keys out, then sign", rec.Header.Thread)}
		}
		rec = out
	}
	return c.admit(ctx, rec)
}

// admit applies the last steps of the seal path to rec, final but for its
// signature: who may write its thread (mayWrite), then signing and
// authorization (authorize). Erasure records, which the log builds, come
// in here.
func (c *Client) admit(ctx context.Context, rec *records.Record) (*records.Record, error) {
	if err := c.mayWrite(ctx, rec.Header.Thread); err != nil {
		return nil, err
	}
	return c.authorize(ctx, rec)
}

// redact applies the redaction policies of thread (the policy thread) to
// rec's body: when they cover a key of it, it returns a record sealed anew
// (same header fields, a new salt) from the body without the covered
// values and with the paths removed listed under "redacted"; else rec
// itself. The record given is never appended, so an excluded value never
// reaches the log.
func (c *Client) redact(ctx context.Context, rec *records.Record, thread string) (*records.Record, error) {
	h := &rec.Header
	if strings.HasPrefix(h.Kind, "core.") {
		return rec, nil
	}
	body, removed, err := c.redactBody(ctx, thread, rec.Body)
	if err != nil || len(removed) == 0 {
		return rec, err
	}
	out, err := records.New(h.Act, h.Kind, h.Thread, h.Actor, time.UnixMilli(h.TS), records.RawBody(body))
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: redacted %s: %w", strings.Join(removed, ", "), err)
	}
	return out, nil
}
