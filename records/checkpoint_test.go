package records

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
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
	for range 500 {
		cases = append(cases, Checkpoint{Summary: word(), Learnings: list(), NextSteps: list(), SessionID: word(), Name: word()})
	}
	for i, c := range cases {
		if !c.validUTF8() {
			t.Fatalf("case %d: not valid UTF-8", i)
		}
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

// A checkpoint with Extra, or with a string that is not valid UTF-8, takes
// the generic encoder, whose verdict stands.
func TestCheckpointEncodingFallback(t *testing.T) {
	for _, c := range []Checkpoint{
		{Summary: "s", Extra: map[string]any{"a": 1}},
		{Summary: "s\xff"},
		{Summary: "s", Learnings: []string{"ok", "\xc3"}},
	} {
		if c.Extra == nil && c.validUTF8() {
			t.Fatalf("%q: valid UTF-8", c.Summary)
		}
		got, gotErr := c.MarshalCBOR()
		want, wantErr := c.marshalMap()
		if !bytes.Equal(got, want) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%+v: MarshalCBOR %x, %v; generic %x, %v", c, got, gotErr, want, wantErr)
		}
	}
}
