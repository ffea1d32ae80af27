package records

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestBodyFromJSON(t *testing.T) {
	for _, tt := range []struct {
		name, json, hex string
	}{
		{"empty object", `{}`, "a0"},
		{"whitespace", " \n{ } \t", "a0"},
		{"small int", `{"a":1}`, "a1616101"},
		{"negative int", `{"a":-25}`, "a161613818"},
		{"minus zero is int 0", `{"a":-0}`, "a1616100"},
		{"max int64", `{"a":9223372036854775807}`, "a161611b7fffffffffffffff"},
		{"min int64", `{"a":-9223372036854775808}`, "a161613b7fffffffffffffff"},
		{"max uint64", `{"a":18446744073709551615}`, "a161611bffffffffffffffff"},
		{"float 0.5 as float16", `{"a":0.5}`, "a16161f93800"},
		{"float 1.0 stays a float", `{"a":1.0}`, "a16161f93c00"},
		{"exponent is a float", `{"a":1e2}`, "a16161f95640"},
		{"float 0.1 as float64", `{"a":0.1}`, "a16161fb3fb999999999999a"},
		{"float32-exact", `{"a":100000.5}`, "a16161fa47c35040"},
		{"string bool null", `{"s":"x","t":true,"n":null}`, "a3616ef66173617861" + "74f5"},
		{"nested", `{"o":{"a":[1,{"b":[]}]}}`, "a1616fa161618201a1616280"},
		{"sorted keys", `{"bb":1,"c":2,"a":3}`, "a3616103616302626262" + "01"},
		{"unicode", `{"é":"日本"}`, "a162c3a966e697a5e69cac"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BodyFromJSON([]byte(tt.json))
			if err != nil {
				t.Fatalf("BodyFromJSON(%s): %v", tt.json, err)
			}
			if got, want := hex.EncodeToString(got), tt.hex; got != want {
				t.Fatalf("BodyFromJSON(%s)=%s, want %s", tt.json, got, want)
			}
		})
	}
}

func TestBodyFromJSONRejects(t *testing.T) {
	for _, tt := range []struct {
		name, json, field, rule string
	}{
		{"empty", ``, "body", "must be a JSON object: empty input"},
		{"array", `[1]`, "body", "must be a JSON object: got an array"},
		{"number", `1`, "body", "must be a JSON object: got a number"},
		{"null", `null`, "body", "must be a JSON object: got null"},
		{"string", `"s"`, "body", "must be a JSON object: got a string"},
		{"unterminated", `{"a":1`, "body", "must be a JSON object: "},
		{"missing value", `{"a":}`, "body", "must be a JSON object: invalid character"},
		{"two objects", `{} {}`, "body", "must be a JSON object: data after the object"},
		{"trailing garbage", `{}x`, "body", "must be a JSON object: "},
		{"uint64 overflow", `{"a":{"b":[0,18446744073709551616]}}`, "body.a.b[1]", "integer \"18446744073709551616\" is out of range"},
		{"below -2^64", `{"n":-18446744073709551617}`, "body.n", "out of range"},
		{"float overflow", `{"f":1e400}`, "body.f", "out of the float64 range"},
		{"too deep", `{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, "body", "must be a canonical CBOR map"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BodyFromJSON([]byte(tt.json))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("BodyFromJSON(%s)=%v, want a *FieldError", tt.json, err)
			}
			if got, want := fe.Field, tt.field; got != want {
				t.Fatalf("Field=%q, want %q", got, want)
			}
			if !strings.Contains(fe.Rule, tt.rule) {
				t.Fatalf("Rule=%q, want it to contain %q", fe.Rule, tt.rule)
			}
		})
	}
}

func TestBodyToJSON(t *testing.T) {
	for _, tt := range []struct {
		name, hex, json string
	}{
		{"empty", "a0", `{}`},
		{"ints", "a3 6161 01 6162 3818 6163 1bffffffffffffffff", `{"a":1,"b":-25,"c":18446744073709551615}`},
		{"-2^64", "a1 6161 3bffffffffffffffff", `{"a":-18446744073709551616}`},
		{"floats", "a3 6161 f93800 6162 fb3fb999999999999a 6163 fb7e37e43c8800759c", `{"a":0.5,"b":0.1,"c":1e+300}`},
		{"bytes as base64", "a1 6162 43 010203", `{"b":"AQID"}`},
		{"non-string keys", "a4 01 6161 20 6162 41ff 6164 f4 6163", `{"-1":"b","/w==":"d","1":"a","false":"c"}`},
		{"nested", "a1 616f a1 6161 82 f6 a0", `{"o":{"a":[null,{}]}}`},
		{"no HTML escaping", "a1 6161 63 3c263e", `{"a":"<&>"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BodyToJSON(mustHex(t, tt.hex))
			if err != nil {
				t.Fatalf("BodyToJSON(%s): %v", tt.hex, err)
			}
			if got, want := string(got), tt.json; got != want {
				t.Fatalf("BodyToJSON(%s)=%s, want %s", tt.hex, got, want)
			}
		})
	}
	// Keys 1 and "1" both become "1".
	if _, err := BodyToJSON(mustHex(t, "a2 01 01 6131 02")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("BodyToJSON(colliding keys)=%v, want ErrInvalid", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	in := `{"a":[1,-2,0.5,"s",true,null,{"b":{}}],"big":18446744073709551615,"f":1.5,"unicode":"naïve 🎉"}`
	body, err := BodyFromJSON([]byte(in))
	if err != nil {
		t.Fatalf("BodyFromJSON: %v", err)
	}
	out, err := BodyToJSON(body)
	if err != nil {
		t.Fatalf("BodyToJSON: %v", err)
	}
	if got, want := string(out), in; got != want {
		t.Fatalf("round trip=%s, want %s", got, want)
	}
}

// CBOR integers reach down to -2^64; JSON bodies can hold all of them, and
// they come back out as they went in.
func TestBodyJSONBigNegative(t *testing.T) {
	for _, in := range []string{`{"n":-9223372036854775809}`, `{"n":-18446744073709551616}`} {
		b, err := BodyFromJSON([]byte(in))
		if err != nil {
			t.Fatalf("BodyFromJSON(%s): %v", in, err)
		}
		out, err := BodyToJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(out), in; got != want {
			t.Fatalf("round trip=%s, want %s", got, want)
		}
	}
}
