package records

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The direct encoding of a checkpoint is byte for byte what the generic
// encoder makes of the same map, at every length boundary of CBOR's heads
// and with absent, empty and long fields; the direct decoder reads it back.
func TestCheckpointEncodings(t *testing.T) {
	lens := []int{0, 1, 23, 24, 255, 256, 65535, 65536}
	var cases []Checkpoint
	for _, n := range lens {
		s := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		cases = append(cases,
			Checkpoint{Summary: s},
			Checkpoint{Summary: "s", Learnings: []string{s}, NextSteps: []string{}, SessionID: s, Name: s},
			Checkpoint{Summary: "s", NextSteps: []string{s, s}, Name: "n"},
		)
	}
	for _, n := range []int{0, 1, 23, 24, 300} {
		items := make([]string, n)
		for i := range items {
			items[i] = strings.Repeat("l", i)
		}
		cases = append(cases, Checkpoint{Summary: "s", Learnings: items, NextSteps: items})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26)))+"€", rng.IntN(40))
	}
	list := func() []string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+rng.IntN(5))
		for i := range out {
			out[i] = word()
		}
		return out
	}
	parent := Header{V: FormatVersion, Act: ActLearn, Kind: KindCheckpoint, Thread: "t", Actor: "did:x:y", TS: 1}.ID()
	for i := range 500 {
		c := Checkpoint{Summary: word(), Learnings: list(), NextSteps: list(), SessionID: word(), Name: word()}
		if i%2 == 0 {
			c.Parent = parent
		}
		cases = append(cases, c)
	}
	for i, c := range cases {
		want, err := c.marshalMap()
		if err != nil {
			t.Fatalf("case %d: marshalMap: %v", i, err)
		}
		got, err := c.MarshalCBOR()
		if err != nil {
			t.Fatalf("case %d: MarshalCBOR: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: direct encoding\n% x\nwant (generic)\n% x", i, got[:min(len(got), 64)], want[:min(len(want), 64)])
		}
		if _, ok := decodeCheckpointDirect(got); !ok {
			t.Fatalf("case %d: not decoded directly", i)
		}
		back, err := DecodeCheckpoint(got)
		if err != nil {
			t.Fatalf("case %d: DecodeCheckpoint: %v", i, err)
		}
		if !reflect.DeepEqual(*back, c) {
			t.Fatalf("case %d: decoded %+v, want %+v", i, *back, c)
		}
	}
}

// A checkpoint string that is not valid UTF-8 is refused when the record
// is made, naming the field: stored, it would be a record no reader
// accepts.
func TestNewRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		cp    Checkpoint
		field string
	}{
		{Checkpoint{Summary: "s\xff", Learnings: []string{"l"}}, "body.summary"},
		{Checkpoint{Summary: "s", Learnings: []string{"ok", "\xc3"}}, "body.learnings[1]"},
		{Checkpoint{Summary: "s", Learnings: []string{"l"}, NextSteps: []string{"\xfe"}}, "body.next_steps[0]"},
		{Checkpoint{Summary: "s", Learnings: []string{"l"}, SessionID: "\xc0\x80"}, "body.session_id"},
		{Checkpoint{Summary: "s", Learnings: []string{"l"}, Name: "n\xff"}, "body.name"},
	} {
		_, err := New(ActLearn, KindCheckpoint, "th", "did:sync:agent:dev", time.Now(), &tc.cp)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err=%v, want a *FieldError on %s", tc.cp, err, tc.field)
		}
	}
}
