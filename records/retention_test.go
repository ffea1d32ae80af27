package records

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRetentionRoundTrip(t *testing.T) {
	for _, r := range []Retention{
		{Scope: ScopeThread, KeepLast: 3},
		{Scope: ScopeAll, KeepLast: 1, MaxAgeMS: 30 * 24 * 3600 * 1000},
	} {
		thread := "th"
		if r.Scope == ScopeAll {
			thread = RetentionThread
		}
		rec, err := New(ActKnow, KindRetention, thread, "did:sync:agent:dev", time.UnixMilli(1700000000000), &r)
		if err != nil {
			t.Fatalf("New(%+v): %v", r, err)
		}
		got, err := DecodeRetention(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		if *got != r {
			t.Fatalf("decoded %+v, want %+v", *got, r)
		}
	}
	// The canonical encoding: keys shortest first, "max_age_ms" absent
	// when zero.
	b, err := Retention{Scope: ScopeAll, KeepLast: 2}.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b, mustHex(t, "a26573636f706563616c6c696b6565705f6c61737402"); !bytes.Equal(got, want) {
		t.Fatalf("encoding=%x, want %x", got, want)
	}
}

func TestPinRoundTrip(t *testing.T) {
	target := testHeader(t, "th").ID()
	for _, p := range []Pin{{Target: target}, {Target: target, Reason: "release notes"}} {
		rec, err := New(ActKnow, KindPin, "th", "did:sync:agent:dev", time.UnixMilli(1700000000000), &p)
		if err != nil {
			t.Fatalf("New(%+v): %v", p, err)
		}
		got, err := DecodePin(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		if *got != p {
			t.Fatalf("decoded %+v, want %+v", *got, p)
		}
	}
}

func TestRetentionAndPinRules(t *testing.T) {
	target := testHeader(t, "th").ID()
	for _, tt := range []struct {
		name       string
		act, kind  string
		body       any
		field, has string
	}{
		{"retention needs KNOW", ActLearn, KindRetention, &Retention{Scope: ScopeThread, KeepLast: 1}, "act", "requires act KNOW"},
		{"pin needs KNOW", ActDo, KindPin, &Pin{Target: target}, "act", "requires act KNOW"},
		{"unknown scope", ActKnow, KindRetention, &Retention{Scope: "everything", KeepLast: 1}, "body.scope", `"everything"`},
		{"no scope", ActKnow, KindRetention, map[string]any{"keep_last": 1}, "body.scope", `must be "thread" or "all"`},
		{"keep none", ActKnow, KindRetention, &Retention{Scope: ScopeAll}, "body.keep_last", "at least 1, or 0 with max_age_ms"},
		{"negative keep", ActKnow, KindRetention, map[string]any{"scope": "all", "keep_last": -1}, "body.keep_last", "unsigned integer"},
		{"zero age", ActKnow, KindRetention, map[string]any{"scope": "all", "keep_last": 1, "max_age_ms": 0}, "body.max_age_ms", "positive"},
		{"text age", ActKnow, KindRetention, map[string]any{"scope": "all", "keep_last": 1, "max_age_ms": "30d"}, "body.max_age_ms", "unsigned integer"},
		{"extra key", ActKnow, KindRetention, map[string]any{"scope": "all", "keep_last": 1, "keep_named": true}, "body", `unknown key "keep_named"`},
		{"no target", ActKnow, KindPin, map[string]any{"reason": "r"}, "body.target", "must name"},
		{"target as text", ActKnow, KindPin, map[string]any{"target": target.String()}, "body.target", "byte string"},
		{"target not a CID", ActKnow, KindPin, map[string]any{"target": []byte{1, 2, 3}}, "body.target", "36 bytes"},
		{"empty reason", ActKnow, KindPin, map[string]any{"target": target.Bytes(), "reason": ""}, "body.reason", "leave it out"},
		{"long reason", ActKnow, KindPin, &Pin{Target: target, Reason: strings.Repeat("x", 1025)}, "body.reason", "at most 1024"},
		{"pin extra key", ActKnow, KindPin, map[string]any{"target": target.Bytes(), "until": 5}, "body", `unknown key "until"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.act, tt.kind, "th", "did:sync:agent:dev", time.UnixMilli(1700000000000), tt.body)
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err=%v, want a *FieldError", err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Rule, tt.has) {
				t.Fatalf("err=%v, want field %q and a rule containing %q", err, tt.field, tt.has)
			}
		})
	}
}

// A policy's scope must match its thread: a policy of all threads read from
// an ordinary thread, or a thread's own policy read from the policy
// thread, would stand in for the policy that is really there.
func TestRetentionScopeMatchesThread(t *testing.T) {
	for _, tt := range []struct {
		scope, thread, rule string
	}{
		{ScopeAll, "th", `"all" is the policy of all threads and belongs on thread spl/retention, got thread "th"`},
		{ScopeThread, RetentionThread, `must be "all" on thread spl/retention (the policy of all threads), got "thread"`},
	} {
		_, err := New(ActKnow, KindRetention, tt.thread, "did:sync:agent:dev", time.UnixMilli(1700000000000), &Retention{Scope: tt.scope, KeepLast: 1})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "body.scope" || fe.Rule != tt.rule {
			t.Errorf("scope %s on thread %s: err=%v, want body.scope: %s", tt.scope, tt.thread, err, tt.rule)
		}
	}
	for _, ok := range []struct{ scope, thread string }{{ScopeAll, RetentionThread}, {ScopeThread, "th"}} {
		if _, err := New(ActKnow, KindRetention, ok.thread, "did:sync:agent:dev", time.UnixMilli(1700000000000), &Retention{Scope: ok.scope, KeepLast: 1}); err != nil {
			t.Errorf("scope %s on thread %s: %v", ok.scope, ok.thread, err)
		}
	}
}
