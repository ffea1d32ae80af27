package sdk

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spl-dev/spl/env"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// Actors proven. A record may carry its actor's Ed25519 signature
// (records/sign.go): the Client signs every record it writes with the key
// of WithSigningKey (or the file $SPL_ACTOR_KEY names), and checks,
// before anything is appended, that a signed record is signed by the key
// bound to its actor: the key in the DID of a did:key actor, else the
// newest core.actor.key binding on spl/actors (BindActorKey). With
// WithRequireSigned it also refuses unsigned records. Both refusals are
// *records.FieldError values, field "signature" or "actor", which spl
// serve answers with 400.

// ActorKeyFile is the name of the default key file in the data
// directory, where spl actor new writes a key unless told otherwise.
const ActorKeyFile = "actor.key"

// WithSigningKey signs every record the client writes (Append, Emit,
// EmitAsync, checkpoints, runs, erasures) with key. The default is the key
// in the file $SPL_ACTOR_KEY names, else none: records are unsigned.
func WithSigningKey(key ed25519.PrivateKey) Option {
	return func(c *config) { c.signKey, c.noSigning = key, false }
}

// WithoutSigning makes the client sign nothing, whatever $SPL_ACTOR_KEY
// says: for a server, whose clients' records are signed by their authors
// or not at all.
func WithoutSigning() Option { return func(c *config) { c.signKey, c.noSigning = nil, true } }

// WithRequireSigned refuses every record that is not signed by its actor's
// key (a *records.FieldError on "actor"), whichever face wrote it: the
// rule of spl serve --require-signed.
func WithRequireSigned() Option { return func(c *config) { c.requireSigned = true } }

// GenerateKey returns a new Ed25519 key and its did:key.
func GenerateKey() (ed25519.PrivateKey, string, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("spl/sdk: generate key: %w", err)
	}
	return key, records.DIDKey(pub), nil
}

// WriteKeyFile writes key to path as PKCS #8 PEM ("PRIVATE KEY", the form
// openssl genpkey -algorithm ed25519 writes), mode 0600, creating its
// directory (0700) when needed. It never replaces a file.
func WriteKeyFile(path string, key ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("spl/sdk: write key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("spl/sdk: write key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("spl/sdk: write key: %w", err)
	}
	werr := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("spl/sdk: write key %s: %w", path, err)
	}
	return nil
}

// ReadKeyFile reads an Ed25519 key written by WriteKeyFile (any PKCS #8
// PEM Ed25519 key). A file that others than its owner can read is
// refused: the key proves who the actor is.
func ReadKeyFile(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: read key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("spl/sdk: read key %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: read key: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("spl/sdk: read key %s: not a PEM PRIVATE KEY", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: read key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("spl/sdk: read key %s: a %T, not an Ed25519 key", path, k)
	}
	return key, nil
}

// signingKey returns the key of cfg: WithSigningKey's, else the one in
// $SPL_ACTOR_KEY's file, else none.
func signingKey(cfg config) (ed25519.PrivateKey, error) {
	if cfg.signKey != nil || cfg.noSigning {
		return cfg.signKey, nil
	}
	if path := env.ActorKey(); path != "" {
		key, err := ReadKeyFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", env.ActorKeyVar, err)
		}
		return key, nil
	}
	return nil, nil
}

// SigningKey returns the did:key of the key the client signs with, or ""
// when it signs nothing.
func (c *Client) SigningKey() string {
	if c.cfg.signKey == nil {
		return ""
	}
	return records.DIDKey(c.cfg.signKey.Public().(ed25519.PublicKey))
}

// BindActorKey binds actor (a DID, not a did:key) to the Ed25519 key of
// the did:key key, from this record's clock on; with revoke, withdraws
// actor's key instead (key may then be empty). It is an administrator's
// act: whoever holds the log's write credential can bind, so the records
// on spl/actors are the ones to audit (ActorKeys, spl actor list). admin
// is the actor of the binding record (empty: the client's).
func (c *Client) BindActorKey(ctx context.Context, admin, actor, key string, revoke bool) (Receipt, error) {
	body := &records.ActorKey{Actor: actor, PublicKey: key, Revoked: revoke}
	if revoke && key == "" {
		if cur, ok := c.actorKey(ctx, actor); ok {
			body.PublicKey = cur
		} else {
			return Receipt{}, &records.FieldError{Field: "actor", Rule: fmt.Sprintf("%s has no key to revoke", actor)}
		}
	}
	r, err := c.Emit(ctx, Event{Act: records.ActKnow, Kind: records.KindActorKey, Thread: records.ActorThread, Actor: admin, Body: body})
	c.keys.clear()
	return r, err
}

// actorKey returns the did:key bound to actor now.
func (c *Client) actorKey(ctx context.Context, actor string) (string, bool) {
	ring, err := c.keys.get(ctx, c.log)
	if err != nil {
		return "", false
	}
	k, ok := ring.KeyAt(actor, 0)
	if !ok {
		return "", false
	}
	return records.DIDKey(k), true
}

// ActorKeys returns every actor's newest binding, sorted by actor.
func (c *Client) ActorKeys(ctx context.Context) ([]records.ActorBinding, error) {
	ring, bad, err := c.log.KeyRing(ctx)
	if err != nil {
		return nil, err
	}
	return ring.Actors(), errors.Join(bad...)
}

// authorize applies the signature rules to rec before it is appended:
// it signs rec with the client's key when rec is unsigned, then refuses a
// signature that does not verify or is not by the key bound to rec's
// actor (field "signature"), and, under WithRequireSigned, an unsigned
// record (field "actor"). It returns the record to append.
func (c *Client) authorize(ctx context.Context, rec *records.Record) (*records.Record, error) {
	if rec.Sig == nil && c.cfg.signKey != nil {
		s := *rec
		s.Sign(c.cfg.signKey)
		rec = &s
	}
	actor := rec.Header.Actor
	if rec.Sig == nil {
		if c.cfg.requireSigned {
			return nil, &records.FieldError{Field: "actor", Rule: fmt.Sprintf("this log requires signed records, and the record of %s is unsigned (sign with --key-file, SPL_ACTOR_KEY or WithSigningKey)", actor)}
		}
		return rec, nil
	}
	ring := &records.KeyRing{}
	if !records.IsDIDKey(actor) {
		var err error
		if ring, err = c.keys.get(ctx, c.log); err != nil {
			return nil, err
		}
	}
	if chk := ring.Check(0, rec); chk.Failed() {
		rule := chk.Reason
		if chk.Status == records.SigWrongKey && chk.Bound == "" {
			rule += fmt.Sprintf(" (an administrator binds it: spl actor bind %s --key %s)", actor, chk.Key)
		}
		return nil, &records.FieldError{Field: "signature", Rule: rule}
	}
	return rec, nil
}

// keyCache holds the log's key ring, read again whenever spl/actors has
// moved: a binding holds for the next append of every client.
type keyCache struct {
	mu    sync.Mutex
	clock uint64 // spl/actors' last clock when ring was read
	ring  *records.KeyRing
}

func (k *keyCache) get(ctx context.Context, l *splog.Log) (*records.KeyRing, error) {
	clock, err := l.ThreadClock(ctx, records.ActorThread)
	if err != nil && !errors.Is(err, splog.ErrNotFound) {
		return nil, fmt.Errorf("spl/sdk: actor keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ring != nil && k.clock == clock {
		return k.ring, nil
	}
	ring, _, err := l.KeyRing(ctx) // bindings that do not validate bind nothing
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: actor keys: %w", err)
	}
	k.ring, k.clock = ring, clock
	return ring, nil
}

func (k *keyCache) clear() {
	k.mu.Lock()
	k.ring = nil
	k.mu.Unlock()
}

// signedRecord builds the record of an event its author signed: with the
// author's salt and time, so that it has the id the author signed, and
// the author's signature.
func (c *Client) signedRecord(ev Event) (*records.Record, error) {
	switch {
	case ev.Signature == nil:
		return nil, &records.FieldError{Field: "signature", Rule: "required with salt: a salt is given only to sign the record"}
	case len(ev.Salt) != records.SaltSize:
		return nil, &records.FieldError{Field: "salt", Rule: fmt.Sprintf("required with signature: the %d random bytes of the signed record's salt, got %d bytes", records.SaltSize, len(ev.Salt))}
	case ev.Time.IsZero():
		return nil, &records.FieldError{Field: "ts", Rule: "required with signature: the signed record's time"}
	}
	var salt [records.SaltSize]byte
	copy(salt[:], ev.Salt)
	rec, err := records.NewWithSalt(ev.Act, ev.Kind, ev.Thread, ev.Actor, ev.Time, ev.Body, salt)
	if err != nil {
		return nil, err
	}
	sig := *ev.Signature
	if sig.Key == nil {
		if records.IsDIDKey(ev.Actor) {
			sig.Key, _ = records.ParseDIDKey(ev.Actor)
		} else if k, ok := c.actorKey(context.Background(), ev.Actor); ok {
			sig.Key, _ = records.ParseDIDKey(k)
		} else {
			return nil, &records.FieldError{Field: "signature", Rule: fmt.Sprintf("actor %s has no key bound; name the signing key (key: did:key:…)", ev.Actor)}
		}
	}
	rec.Sig = &sig
	return rec, nil
}
