package records

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// recordArgs are the arguments of New.
type recordArgs struct {
	act, kind, thread, actor string
	ts                       time.Time
	body                     any
}

// validArgs returns arguments New accepts.
func validArgs() recordArgs {
	return recordArgs{
		act:    ActKnow,
		kind:   "note.text",
		thread: "main",
		actor:  "did:sync:agent:dev",
		ts:     time.UnixMilli(1700000000000),
		body:   map[string]any{"text": "hello"},
	}
}

func (a recordArgs) new() (*Record, error) {
	return New(a.act, a.kind, a.thread, a.actor, a.ts, a.body)
}

// testHeader returns the header of a valid record.
func testHeader(t *testing.T, thread string) Header {
	t.Helper()
	a := validArgs()
	a.thread = thread
	r, err := a.new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r.Header
}

func TestValidate(t *testing.T) {
	target := testHeader(t, "erased")
	erasureRec, err := New(ActForget, KindErasure, "erased", "did:sync:agent:dev", time.UnixMilli(1700000000000),
		&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}, Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	erasureHeader := erasureRec.Header
	checkpoint := func(c *Checkpoint) func(*recordArgs) {
		return func(a *recordArgs) { a.act, a.kind, a.body = ActLearn, KindCheckpoint, c }
	}
	erasure := func(e *Erasure) func(*recordArgs) {
		return func(a *recordArgs) { a.act, a.kind, a.body = ActForget, KindErasure, e }
	}
	for _, tt := range []struct {
		name  string
		edit  func(*recordArgs)
		field string
		rule  string
	}{
		{"lower-case act", func(a *recordArgs) { a.act = "know" }, "act", `must match ^[A-Z][A-Z0-9_]{1,15}$ (upper-case verb), got "know"`},
		{"one-letter act", func(a *recordArgs) { a.act = "K" }, "act", "must match"},
		{"act too long", func(a *recordArgs) { a.act = "ABCDEFGHIJKLMNOPQ" }, "act", "must match"},
		{"invalid kind", func(a *recordArgs) { a.kind = "Agent.Step" }, "kind", `got "Agent.Step"`},
		{"kind with empty part", func(a *recordArgs) { a.kind = "agent..step" }, "kind", "must match"},
		{"kind too long", func(a *recordArgs) { a.kind = strings.Repeat("a", 129) }, "kind", "at most 128 bytes"},
		{"kind with 17 parts", func(a *recordArgs) { a.kind = strings.Repeat("a.", 16) + "a" }, "kind", "at most 16 dot-separated parts"},
		{"empty thread", func(a *recordArgs) { a.thread = "" }, "thread", "must be 1-256 bytes"},
		{"257-byte thread", func(a *recordArgs) { a.thread = strings.Repeat("x", 257) }, "thread", "got 257 bytes"},
		{"thread with newline", func(a *recordArgs) { a.thread = "a\nb" }, "thread", "control characters, got U+000A at byte 1"},
		{"thread with DEL", func(a *recordArgs) { a.thread = "a\x7f" }, "thread", "control characters"},
		{"thread not UTF-8", func(a *recordArgs) { a.thread = "a\xff" }, "thread", "valid UTF-8"},
		{"actor not a DID", func(a *recordArgs) { a.actor = "agent-dev" }, "actor", `must be a DID`},
		{"actor upper-case method", func(a *recordArgs) { a.actor = "did:Sync:dev" }, "actor", "must be a DID"},
		{"actor empty id", func(a *recordArgs) { a.actor = "did:sync:" }, "actor", "must be a DID"},
		{"actor with space", func(a *recordArgs) { a.actor = "did:sync:agent dev" }, "actor", "must be a DID"},
		{"actor too long", func(a *recordArgs) { a.actor = "did:sync:" + strings.Repeat("a", 248) }, "actor", "at most 256 bytes"},
		{"ts 0", func(a *recordArgs) { a.ts = time.UnixMilli(0) }, "ts", "got 0"},
		{"zero time", func(a *recordArgs) { a.ts = time.Time{} }, "ts", "must be Unix milliseconds"},
		{"ts after year 9999", func(a *recordArgs) { a.ts = time.UnixMilli(253402300800000) }, "ts", "got 253402300800000"},
		{"body not a map", func(a *recordArgs) { a.body = []int{1, 2} }, "body", "not a map"},
		{"nil body", func(a *recordArgs) { a.body = nil }, "body", "not a map"},
		{"body not encodable", func(a *recordArgs) { a.body = map[string]any{"c": make(chan int)} }, "body", "cannot encode as CBOR"},
		{"raw body not canonical", func(a *recordArgs) { a.body = RawBody(mustHex(t, "a161611801")) }, "body", "not canonical"},
		{"raw body garbage", func(a *recordArgs) { a.body = []byte{0xa1} }, "body", "must be a canonical CBOR map"},
		{"body with NaN", func(a *recordArgs) { a.body = map[string]any{"x": nan()} }, "body", "must be a canonical CBOR map"},
		{"checkpoint with empty summary", checkpoint(&Checkpoint{Learnings: []string{"l"}}), "body.summary", "must not be empty"},
		{"summary over 8 KiB", checkpoint(&Checkpoint{Summary: strings.Repeat("s", 8193), Learnings: []string{"l"}}), "body.summary", "at most 8192 bytes, got 8193"},
		{"no learnings", checkpoint(&Checkpoint{Summary: "s"}), "body.learnings", "at least one"},
		{"empty learning", checkpoint(&Checkpoint{Summary: "s", Learnings: []string{"a", ""}}), "body.learnings[1]", "must not be empty"},
		{"checkpoint with act KNOW", func(a *recordArgs) {
			checkpoint(&Checkpoint{Summary: "s", Learnings: []string{"l"}})(a)
			a.act = ActKnow
		}, "act", "kind agent.session.checkpoint requires act LEARN"},
		{"checkpoint summary wrong type", func(a *recordArgs) {
			a.act, a.kind, a.body = ActLearn, KindCheckpoint, map[string]any{"summary": 1, "learnings": []string{"l"}}
		}, "body.summary", "must be a text string, got unsigned integer"},
		{"checkpoint learning wrong type", func(a *recordArgs) {
			a.act, a.kind, a.body = ActLearn, KindCheckpoint, map[string]any{"summary": "s", "learnings": []any{"l", 2}}
		}, "body.learnings[1]", "must be a text string"},
		{"checkpoint Extra shadows a field", checkpoint(&Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: map[string]any{"name": "x"}}), "body", "is a checkpoint field"},
		{"erasure with no targets", erasure(&Erasure{Reason: "r"}), "body.targets", "at least one"},
		{"erasure target id mismatch", erasure(&Erasure{Targets: []ErasureTarget{{ID: ID{1}, Header: target}}, Reason: "r"}), "body.targets[0].id", "does not match the id of its header"},
		{"erasure target named twice", erasure(&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}, {ID: target.ID(), Header: target}}, Reason: "r"}), "body.targets[1].id", "named twice"},
		{"erasure of an erasure", erasure(&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}, {ID: erasureHeader.ID(), Header: erasureHeader}}, Reason: "r"}), "body.targets[1]", "must not be an erasure record (erasures stay as the audit trail), got " + erasureHeader.ID().String()},
		{"erasure with empty reason", erasure(&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}}), "body.reason", "must not be empty"},
		{"erasure reason too long", erasure(&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}, Reason: strings.Repeat("r", 1025)}), "body.reason", "at most 1024 bytes"},
		{"erasure with act KNOW", func(a *recordArgs) {
			erasure(&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}, Reason: "r"})(a)
			a.act = ActKnow
		}, "act", "requires act FORGET"},
		{"erasure reason wrong type", func(a *recordArgs) {
			a.act, a.kind, a.body = ActForget, KindErasure, map[string]any{"reason": []byte("r"), "targets": []any{}}
		}, "body.reason", "must be a text string, got byte string"},
		{"erasure target not a map", func(a *recordArgs) {
			a.act, a.kind, a.body = ActForget, KindErasure, map[string]any{"reason": "r", "targets": []any{1}}
		}, "body.targets[0]", "must be a map"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := validArgs()
			tt.edit(&a)
			r, err := a.new()
			if r != nil {
				t.Fatalf("New returned a record, want an error")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err=%v (%T), want a *FieldError", err, err)
			}
			if got, want := fe.Field, tt.field; got != want {
				t.Fatalf("Field=%q, want %q (rule %q)", got, want, fe.Rule)
			}
			if !strings.Contains(fe.Rule, tt.rule) {
				t.Fatalf("Rule=%q, want it to contain %q", fe.Rule, tt.rule)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("errors.Is(%v, ErrInvalid)=false", err)
			}
			if got, want := err.Error(), "spl/records: "+fe.Field+": "+fe.Rule; got != want {
				t.Fatalf("Error()=%q, want %q", got, want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	target := testHeader(t, "erased")
	for _, tt := range []struct {
		name string
		edit func(*recordArgs)
	}{
		{"defaults", func(*recordArgs) {}},
		{"DID with colons", func(a *recordArgs) { a.actor = "did:sync:agent:dev" }},
		{"DID with all id characters", func(a *recordArgs) { a.actor = "did:web:example.com%3A8443:a_b-C.9" }},
		{"custom act", func(a *recordArgs) { a.act = "REVIEW_2" }},
		{"two-letter act", func(a *recordArgs) { a.act = ActDo }},
		{"16-letter act", func(a *recordArgs) { a.act = "ABCDEFGHIJKLMNOP" }},
		{"one-part kind", func(a *recordArgs) { a.kind = "note" }},
		{"16-part kind", func(a *recordArgs) { a.kind = strings.Repeat("a.", 15) + "a" }},
		{"256-byte thread", func(a *recordArgs) { a.thread = strings.Repeat("x", 256) }},
		{"unicode thread", func(a *recordArgs) { a.thread = "研究 🧠 cafe\u0301" }},
		{"ts 1", func(a *recordArgs) { a.ts = time.UnixMilli(1) }},
		{"ts year 9999", func(a *recordArgs) { a.ts = time.UnixMilli(253402300799999) }},
		{"empty body", func(a *recordArgs) { a.body = map[string]any{} }},
		{"raw body", func(a *recordArgs) { a.body = RawBody(mustHex(t, "a1616101")) }},
		{"byte slice body", func(a *recordArgs) { a.body = mustHex(t, "a0") }},
		{"struct body", func(a *recordArgs) {
			a.body = struct {
				Text string `cbor:"text"`
			}{"hi"}
		}},
		{"checkpoint value", func(a *recordArgs) {
			a.act, a.kind, a.body = ActLearn, KindCheckpoint, Checkpoint{Summary: "s", Learnings: []string{"l"}}
		}},
		{"erasure", func(a *recordArgs) {
			a.act, a.kind, a.body = ActForget, KindErasure, &Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}, Reason: "r"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := validArgs()
			tt.edit(&a)
			r, err := a.new()
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateBody(t *testing.T) {
	if err := ValidateBody("unknown.kind", mustHex(t, "a0")); err != nil {
		t.Fatalf("ValidateBody(empty map)=%v, want nil", err)
	}
	err := ValidateBody("unknown.kind", mustHex(t, "80"))
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("ValidateBody(array)=%v, want a *FieldError", err)
	}
	if got, want := fe.Field, "body"; got != want {
		t.Fatalf("Field=%q, want %q", got, want)
	}
}

func TestValidateHeaderVersion(t *testing.T) {
	r, err := validArgs().new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.Header.V = 2
	var fe *FieldError
	if !errors.As(r.Validate(), &fe) {
		t.Fatalf("Validate()=%v, want a *FieldError", r.Validate())
	}
	if got, want := fe.Field, "v"; got != want {
		t.Fatalf("Field=%q, want %q", got, want)
	}
	if got, want := fe.Rule, "must be 1, got 2"; got != want {
		t.Fatalf("Rule=%q, want %q", got, want)
	}
}

func TestCheckHeaderFields(t *testing.T) {
	for _, k := range []string{"agent.step", KindCheckpoint, "a"} {
		if err := CheckKind(k); err != nil {
			t.Errorf("CheckKind(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"", ">", "*", "agent.*", "Agent.step", "a..b", strings.Repeat("a.", 16) + "a"} {
		var fe *FieldError
		if err := CheckKind(k); !errors.As(err, &fe) || fe.Field != "kind" || !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckKind(%q) = %v, want a field error on kind", k, err)
		}
	}
	for _, th := range []string{"", strings.Repeat("a", 257), "a\x01b", "a\xffb"} {
		var fe *FieldError
		if err := CheckThread(th); !errors.As(err, &fe) || fe.Field != "thread" {
			t.Errorf("CheckThread(%q) = %v, want a field error on thread", th, err)
		}
	}
	if err := CheckThread("spl/retention"); err != nil {
		t.Errorf("CheckThread(spl/retention) = %v", err)
	}
	if err := CheckAct(ActLearn); err != nil {
		t.Errorf("CheckAct(LEARN) = %v", err)
	}
	for _, a := range []string{"", "know", "K", ">", "KNOW*"} {
		var fe *FieldError
		if err := CheckAct(a); !errors.As(err, &fe) || fe.Field != "act" {
			t.Errorf("CheckAct(%q) = %v, want a field error on act", a, err)
		}
	}
}
