package log

import (
	"context"
	"errors"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// HeaderSig carries a record's signature (records.Signature), when it has
// one: "<did:key>:<base64 signature>". Like Spl-Id it is beside the record,
// not part of it: the writer sets it from the Sig of the record it is
// given, and every read puts it back on the record it returns. A value
// that does not parse is returned as a Signature with Malformed set, for
// verification to report; the record itself still reads.
const HeaderSig = "Spl-Sig"

// signatureOf returns the signature the message m carries, or nil.
func signatureOf(m stored) *records.Signature {
	v := m.hdr.Get(HeaderSig)
	if v == "" {
		return nil
	}
	s, err := records.ParseSignature(v)
	if err != nil {
		return &records.Signature{Malformed: err.Error()}
	}
	return s
}

// EraseSealed makes Erase hand its erasure record to seal before it is
// appended, and append what seal returns (signed, for one), or nothing
// when seal refuses it: the service layer's rules for every record it
// writes hold for erasures too.
func EraseSealed(seal func(*records.Record) (*records.Record, error)) EraseOption {
	return func(o *eraseOptions) { o.seal = seal }
}

// KeyRing reads the actor key bindings of the log (records.ActorThread).
// Bindings that do not validate are left out and listed in bad; err is a
// failed read. A corrupt binding is skipped: verification reports it.
func (l *Log) KeyRing(ctx context.Context) (ring *records.KeyRing, bad []error, err error) {
	ring = &records.KeyRing{}
	for e, err := range l.Read(ctx, records.ActorThread, Kind(records.KindActorKey)) {
		if err != nil {
			if errors.Is(err, records.ErrCorrupt) {
				continue
			}
			return ring, bad, fmt.Errorf("read actor keys: %w", err)
		}
		if err := ring.Add(e); err != nil {
			bad = append(bad, err)
		}
	}
	return ring, bad, nil
}

// SigProblem is a record whose signature failed, or that is unsigned.
type SigProblem struct {
	Clock  uint64
	ID     records.ID
	Thread string
	Actor  string
	Key    string // the did:key that signed; empty when unsigned or malformed
	Bound  string // the did:key bound to the actor at the clock; empty: none
	Reason string
}

// maxUnsignedListed bounds VerifyReport.Unsigned: the count is exact.
const maxUnsignedListed = 100

// signedAt is where verification met a signed record first.
type signedAt struct {
	id    records.ID
	clock uint64
}

// firstSigned records e as the record of its signing id, and reports
// false with the first one when another record already has that signing
// id: a copy. An author signs a record once, with a random salt, so two
// records of one signing id are one record stored twice.
func (rep *VerifyReport) firstSigned(e Entry) (signedAt, bool) {
	if rep.signed == nil {
		rep.signed = make(map[records.ID]signedAt)
	}
	sid := e.Record.Header.SigningID()
	if first, ok := rep.signed[sid]; ok && first.id != e.ID {
		return first, false
	}
	rep.signed[sid] = signedAt{id: e.ID, clock: e.Clock}
	return signedAt{}, true
}

// checkSig applies the signature rule (records.KeyRing.Check) to e.
func (rep *VerifyReport) checkSig(ring *records.KeyRing, e Entry) {
	c := ring.Check(e.Clock, e.Record)
	p := SigProblem{Clock: e.Clock, ID: e.ID, Thread: e.Record.Header.Thread, Actor: e.Record.Header.Actor, Key: c.Key, Bound: c.Bound, Reason: c.Reason}
	switch c.Status {
	case records.SigOK:
		if first, ok := rep.firstSigned(e); !ok {
			p.Reason = fmt.Sprintf("a copy of signed record %s (clock %d): its author signed it once, and it is stored twice (the signature leaves out prev, so a copy chained elsewhere in the thread still verifies; only one can be the author's)", first.id, first.clock)
			rep.BadSig = append(rep.BadSig, p)
			return
		}
		rep.Signed++
	case records.SigUnsigned:
		rep.UnsignedCount++
		if len(rep.Unsigned) < maxUnsignedListed {
			p.Reason = "unsigned"
			if c.Bound != "" {
				p.Reason = "unsigned, though actor " + p.Actor + " has key " + c.Bound
			}
			rep.Unsigned = append(rep.Unsigned, p)
		}
	default:
		rep.BadSig = append(rep.BadSig, p)
	}
}
