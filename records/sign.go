package records

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// Signatures (wire format; never change).
//
// A record may carry an Ed25519 signature by its actor. The signature is
// not part of the record: the content id covers the header only, and ids
// do not change when a record is signed. The log stores it beside the
// record, in the message header Spl-Sig (package log), as
//
//	<did:key of the signing key>:<standard base64 of the 64-byte signature>
//
// The signed bytes are
//
//	"spl/v1/sig" || binary CID (36 bytes) of the header with "prev" absent
//
// that is the record's signing id ([Header.SigningID]): the id the record
// has as its author built it, before the log chained it. prev is left out
// because the log's writer sets it when it seals the record, after the
// author gave it up: an author over HTTP cannot know it, and the writer
// holds no author's key. Everything else of the header is signed (act,
// kind, thread, actor, ts and the body digest, hence the body and salt);
// the chain is the log's to prove ([Record.Verify], log.Verify), and so
// is a copy of a signed record chained again in its thread: two records
// of one signing id are one signed record stored twice, which log.Verify
// reports. For a thread's first record the signing id is its id.

// SigDomain prefixes the bytes a record's signature covers.
const SigDomain = "spl/v1/sig"

// Signature is a record's signature and the public key that made it.
type Signature struct {
	Key ed25519.PublicKey // the signer's key; nil when the stored value is malformed
	Sig []byte            // 64 bytes

	// Malformed says what is wrong with a stored value that does not
	// parse (see ParseSignature); Key and Sig are nil then.
	Malformed string
}

// String returns the stored form: "<did:key>:<base64 signature>".
func (s *Signature) String() string {
	return DIDKey(s.Key) + ":" + base64.StdEncoding.EncodeToString(s.Sig)
}

// ParseSignature parses the stored form of a signature. A value that does
// not parse is an error wrapping [ErrInvalid].
func ParseSignature(v string) (*Signature, error) {
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return nil, fmt.Errorf("parse signature: want <did:key>:<base64>: %w", ErrInvalid)
	}
	key, err := ParseDIDKey(v[:i])
	if err != nil {
		return nil, fmt.Errorf("parse signature: %w", err)
	}
	sig, err := DecodeSignature(v[i+1:])
	if err != nil {
		return nil, fmt.Errorf("parse signature: %w", err)
	}
	return &Signature{Key: key, Sig: sig}, nil
}

// DecodeSignature decodes the standard base64 (padded or not) of a 64-byte
// Ed25519 signature.
func DecodeSignature(s string) ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		sig, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("want the base64 of %d bytes: %w", ed25519.SignatureSize, ErrInvalid)
	}
	return sig, nil
}

// SigningID returns the id of h with Prev zero: what a signature of the
// record covers (see SigDomain).
func (h Header) SigningID() ID {
	h.Prev = ID{}
	return h.ID()
}

// SigningBytes returns the bytes a signature over the signing id id
// covers: SigDomain followed by id's binary form.
func SigningBytes(id ID) []byte {
	return append([]byte(SigDomain), id.Bytes()...)
}

// Sign signs r with key and sets r.Sig. Sign it once its header and body
// are final (after redaction); prev may still change.
func (r *Record) Sign(key ed25519.PrivateKey) {
	r.Sig = &Signature{
		Key: key.Public().(ed25519.PublicKey),
		Sig: ed25519.Sign(key, SigningBytes(r.Header.SigningID())),
	}
}

// CheckSignature reports whether r.Sig is a valid signature of r by the key
// it names: nil when it is, an error wrapping [ErrInvalid] when it is not,
// or when r has no signature. It does not say whether the key is the
// actor's ([KeyRing.Check]).
func (r *Record) CheckSignature() error {
	switch {
	case r.Sig == nil:
		return fmt.Errorf("check signature: unsigned: %w", ErrInvalid)
	case r.Sig.Malformed != "":
		return fmt.Errorf("check signature: malformed: %s: %w", r.Sig.Malformed, ErrInvalid)
	case len(r.Sig.Key) != ed25519.PublicKeySize || !ed25519.Verify(r.Sig.Key, SigningBytes(r.Header.SigningID()), r.Sig.Sig):
		return fmt.Errorf("check signature: the signature does not verify over the record's signing id %s: %w", r.Header.SigningID(), ErrInvalid)
	}
	return nil
}

// Actor keys: a DID other than did:key is bound to a public key by a
// record on the log.

// KindActorKey binds an actor to a public key; its body is an [ActorKey]
// and its act must be ActKnow. It is written on [ActorThread] only.
const KindActorKey = "core.actor.key"

// ActorThread is the reserved thread of actor key bindings.
const ActorThread = "spl/actors"

// Actor key body keys (wire format; never change).
const (
	keyActorKeyActor   = "actor"
	keyActorKeyPublic  = "public_key"
	keyActorKeyRevoked = "revoked"
)

// ActorKey is the body of a [KindActorKey] record: from the record's clock
// on, the key of Actor is PublicKey, or, with Revoked, Actor has no key.
// The newest binding of an actor wins. It encodes as the map
// {"actor": text, "public_key": text (a did:key), "revoked": true},
// "revoked" absent when false. The record's own clock is when it holds:
// the body has no time of its own.
type ActorKey struct {
	Actor     string // "actor": a DID that is not a did:key
	PublicKey string // "public_key": the did:key of an Ed25519 key
	Revoked   bool   // "revoked": the actor's key is withdrawn
}

// MarshalCBOR encodes k as a canonical CBOR map.
func (k ActorKey) MarshalCBOR() ([]byte, error) {
	m := map[string]any{keyActorKeyActor: k.Actor, keyActorKeyPublic: k.PublicKey}
	if k.Revoked {
		m[keyActorKeyRevoked] = true
	}
	return encMode.Marshal(m)
}

// DecodeActorKey strictly decodes an actor key body. It does not apply
// [ActorKey.Validate].
func DecodeActorKey(body []byte) (*ActorKey, error) {
	m, err := strictKeys(body, KindActorKey, keyActorKeyActor, keyActorKeyPublic, keyActorKeyRevoked)
	if err != nil {
		return nil, fmt.Errorf("decode actor key: %w", err)
	}
	k := &ActorKey{}
	if k.Actor, err = textValue("body."+keyActorKeyActor, m[keyActorKeyActor]); err != nil {
		return nil, fmt.Errorf("decode actor key: %w", err)
	}
	if k.PublicKey, err = textValue("body."+keyActorKeyPublic, m[keyActorKeyPublic]); err != nil {
		return nil, fmt.Errorf("decode actor key: %w", err)
	}
	if v, ok := m[keyActorKeyRevoked]; ok {
		b, isBool := v.(bool)
		if !isBool || !b {
			return nil, fmt.Errorf("decode actor key: %w", fieldErrorf("body.revoked", "must be true when present"))
		}
		k.Revoked = true
	}
	return k, nil
}

// Validate checks the schema: "body.actor" is a DID and not a did:key
// (which needs no binding), "body.public_key" is an Ed25519 did:key.
func (k *ActorKey) Validate() error {
	if rule := actorRule(k.Actor); rule != "" {
		return fieldErrorf("body.actor", "%s", rule)
	}
	if IsDIDKey(k.Actor) {
		return fieldErrorf("body.actor", "a did:key is its own key and is not bound, got %s", quote(k.Actor))
	}
	if _, err := ParseDIDKey(k.PublicKey); err != nil {
		return fieldErrorf("body.public_key", "must be the did:key of an Ed25519 key (did:key:z6Mk…), got %s", quote(k.PublicKey))
	}
	return nil
}

// KeyRing is the actor key bindings of a log, folded from its
// [KindActorKey] records: which key an actor holds at a clock. The zero
// KeyRing is empty and ready; it is not safe for concurrent use.
type KeyRing struct {
	byActor map[string][]binding
}

type binding struct {
	clock   uint64
	key     ed25519.PublicKey // nil when revoked
	id      ID
	revoked bool
}

// Add folds e into the ring when it is a binding on [ActorThread]; other
// records are ignored. A binding whose body does not validate is ignored
// too and reported as an error.
func (k *KeyRing) Add(e Entry) error {
	h := e.Record.Header
	if h.Kind != KindActorKey || h.Thread != ActorThread {
		return nil
	}
	ak, err := DecodeActorKey(e.Record.Body)
	if err == nil {
		err = ak.Validate()
	}
	if err != nil {
		return fmt.Errorf("actor key binding %s (clock %d): %w", e.ID, e.Clock, err)
	}
	b := binding{clock: e.Clock, id: e.ID, revoked: ak.Revoked}
	if !ak.Revoked {
		b.key, _ = ParseDIDKey(ak.PublicKey)
	}
	if k.byActor == nil {
		k.byActor = make(map[string][]binding)
	}
	bs := k.byActor[ak.Actor]
	i, _ := slices.BinarySearchFunc(bs, e.Clock, func(b binding, c uint64) int { return cmp.Compare(b.clock, c) })
	k.byActor[ak.Actor] = slices.Insert(bs, i, b)
	return nil
}

// KeyAt returns the key of actor for a record at clock: the key of a
// did:key; for another DID, the key of its newest binding at a clock below
// clock (clock 0: its newest binding), none when that binding revoked it
// or there is none.
func (k *KeyRing) KeyAt(actor string, clock uint64) (ed25519.PublicKey, bool) {
	if IsDIDKey(actor) {
		key, err := ParseDIDKey(actor)
		return key, err == nil
	}
	bs := k.byActor[actor]
	for i := len(bs) - 1; i >= 0; i-- {
		if clock == 0 || bs[i].clock < clock {
			return bs[i].key, !bs[i].revoked
		}
	}
	return nil, false
}

// Actors returns the actors with a binding, sorted, and their newest
// binding's key (empty when revoked).
func (k *KeyRing) Actors() []ActorBinding {
	var out []ActorBinding
	for actor, bs := range k.byActor {
		b := bs[len(bs)-1]
		ab := ActorBinding{Actor: actor, Clock: b.clock, ID: b.id, Revoked: b.revoked}
		if b.key != nil {
			ab.Key = DIDKey(b.key)
		}
		out = append(out, ab)
	}
	slices.SortFunc(out, func(a, b ActorBinding) int { return strings.Compare(a.Actor, b.Actor) })
	return out
}

// ActorBinding is an actor's newest binding.
type ActorBinding struct {
	Actor   string
	Key     string // did:key; empty when revoked
	Clock   uint64 // the binding record's clock
	ID      ID     // the binding record's id
	Revoked bool
}

// SigStatus is what [KeyRing.Check] found of a record's signature.
type SigStatus int

const (
	// SigUnsigned: the record carries no signature.
	SigUnsigned SigStatus = iota
	// SigOK: the signature verifies, by the key bound to the actor.
	SigOK
	// SigBad: the signature does not verify, or its stored form is
	// malformed.
	SigBad
	// SigWrongKey: the signature verifies, by a key that is not the
	// actor's at the record's clock.
	SigWrongKey
)

// SigCheck is the outcome of [KeyRing.Check].
type SigCheck struct {
	Status SigStatus
	Key    string // the did:key that signed (empty when unsigned or malformed)
	Bound  string // the did:key bound to the actor at the clock (empty: none)
	Reason string // why, for SigBad and SigWrongKey
}

// Failed reports whether the signature is bad or by the wrong key.
func (c SigCheck) Failed() bool { return c.Status == SigBad || c.Status == SigWrongKey }

// Check checks r's signature against the key bound to r's actor for a
// record at clock (0: a record not yet appended, against the newest
// binding). It is the one rule of signatures that writing (sdk) and
// verifying (log) both apply.
func (k *KeyRing) Check(clock uint64, r *Record) SigCheck {
	var c SigCheck
	actor := r.Header.Actor
	bound, hasKey := k.KeyAt(actor, clock)
	if hasKey {
		c.Bound = DIDKey(bound)
	}
	if r.Sig == nil {
		c.Status = SigUnsigned
		return c
	}
	if r.Sig.Key != nil {
		c.Key = DIDKey(r.Sig.Key)
	}
	if err := r.CheckSignature(); err != nil {
		c.Status, c.Reason = SigBad, strings.TrimPrefix(strings.TrimSuffix(err.Error(), ": "+ErrInvalid.Error()), "check signature: ")
		return c
	}
	switch {
	case !hasKey:
		c.Status, c.Reason = SigWrongKey, fmt.Sprintf("signed by %s, but actor %s has no key bound", c.Key, actor)
	case !bytes.Equal(bound, r.Sig.Key):
		c.Status, c.Reason = SigWrongKey, fmt.Sprintf("signed by %s, but the key of actor %s is %s", c.Key, actor, c.Bound)
	default:
		c.Status = SigOK
	}
	return c
}

// CheckActorDID reports whether did follows the rule of the header field
// "actor" (a *FieldError on "actor" when not).
func CheckActorDID(did string) error {
	if rule := actorRule(did); rule != "" {
		return fieldErrorf("actor", "%s", rule)
	}
	return nil
}
