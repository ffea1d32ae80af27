package records

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
		{"escaped surrogate pair", `{"s":"\ud83c\udf89"}`, "a16173" + "64f09f8e89"},
		{"U+FFFD given is kept", `{"s":"\ufffd"}`, "a16173" + "63efbfbd"},
		{"escapes", `{"s":"\"\\\/\b\f\n\r\t\u00e9"}`, "a16173" + "6a225c2f080c0a0d09c3a9"},
		{"smallest float64", `{"a":5e-324}`, "a16161fb0000000000000001"},
		{"trailing zeros and exponents keep the value", `{"a":[1.50,15e-1,0.15E+1,1.5000e0]}`, "a1616184f93e00f93e00f93e00f93e00"},
		{"shortest text of a float64", `{"a":0.30000000000000004}`, "a16161fb3fd3333333333334"},
		{"largest float64", `{"a":1.7976931348623157e308}`, "a16161fb7fefffffffffffff"},
		{"zero with a tiny exponent", `{"a":0.0e-400}`, "a16161f90000"},
		{"-0.0 is a float", `{"a":-0.0}`, "a16161f98000"},
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
		{"two objects", `{} {}`, "body", "must be a JSON object: data after the value"},
		{"trailing garbage", `{}x`, "body", "must be a JSON object: "},
		{"uint64 overflow", `{"a":{"b":[0,18446744073709551616]}}`, "body.a.b[1]", "integer \"18446744073709551616\" is out of range"},
		{"below -2^64", `{"n":-18446744073709551617}`, "body.n", "out of range"},
		{"float overflow", `{"f":1e400}`, "body.f", `number "1e400" cannot be kept exactly`},
		{"negative float overflow", `{"f":[-1.5e309]}`, "body.f[0]", "beyond the float64 range"},
		{"float underflow", `{"a":{"b":1e-400}}`, "body.a.b", `number "1e-400" cannot be kept exactly`},
		{"negative underflow", `{"a":-2.5e-999}`, "body.a", "would become 0"},
		{"more digits than a float64", `{"pi":3.141592653589793238462643383279}`, "body.pi", "would keep 3.141592653589793"},
		{"rounded to the smallest float64", `{"a":2.5e-324}`, "body.a", "would keep 5e-324"},
		{"the float's exact value is not its text", `{"a":0.1000000000000000055511151231257827}`, "body.a", "would keep 0.1"},
		{"seventeen digits of 0.1", `{"a":[0.10000000000000001]}`, "body.a[0]", "would keep 0.1"},
		{"an integer written as a float beyond 2^53", `{"a":9007199254740993.0}`, "body.a", "would keep 9.007199254740992e+15"},
		{"integer minus zero", `{"a":-0}`, "body.a", "no negative zero"},
		{"huge integer", `{"n":` + strings.Repeat("9", 5000) + `}`, "body.n", "out of range"},
		{"duplicate key", `{"x":1,"x":2}`, "body.x", `duplicate key "x"`},
		{"duplicate nested key", `{"a":{"b":[{"k":1,"j":2,"k":1}]}}`, "body.a.b[0].k", `duplicate key "k"`},
		{"duplicate after escape", `{"k":1,"\u006b":2}`, "body.k", `duplicate key "k"`},
		{"invalid UTF-8 value", "{\"s\":\"a\xffb\"}", "body.s", "invalid UTF-8"},
		{"invalid UTF-8 key", "{\"a\":{\"k\xc3\":1}}", `body.a."k\xc3"`, "key: invalid UTF-8"},
		{"overlong UTF-8", "{\"s\":\"\xc0\xaf\"}", "body.s", "invalid UTF-8"},
		{"UTF-8 surrogate", "{\"s\":\"\xed\xa0\x80\"}", "body.s", "invalid UTF-8"},
		{"lone high surrogate", `{"s":"\ud800"}`, "body.s", `lone surrogate \ud800`},
		{"lone low surrogate", `{"s":["ok","x\udc00y"]}`, "body.s[1]", `lone surrogate \udc00`},
		{"high surrogate then not low", `{"s":"\ud800\u0041"}`, "body.s", `lone surrogate \ud800`},
		{"lone surrogate in key", `{"\ud83d":1}`, `body."\\ud83d"`, `key: lone surrogate \ud83d`},
		{"bad escape", `{"s":"\x"}`, "body", "must be a JSON object: invalid character"},
		{"control character", "{\"s\":\"a\tb\"}", "body", "must be a JSON object: invalid character"},
		{"leading zero", `{"n":01}`, "body", "must be a JSON object: invalid character"},
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

// CheckJSON reads any JSON value, under a root the caller names: "" for a
// request whose top-level keys are field names of their own.
func TestCheckJSON(t *testing.T) {
	for _, tt := range []struct {
		name, json, root, field, rule string // field "": accepted
	}{
		{"request", `{"thread":"t","body":{"a":[1,2.5,"x"]},"ts":1}`, "", "", ""},
		{"array", `[1,{"a":null}]`, "", "", ""},
		{"duplicate field", `{"thread":"a","act":"KNOW","thread":"b"}`, "", "thread", `duplicate key "thread"`},
		{"duplicate in body", `{"thread":"a","body":{"x":1,"x":1}}`, "", "body.x", `duplicate key "x"`},
		{"lone surrogate in a field", `{"thread":"\ud800"}`, "", "thread", `lone surrogate \ud800`},
		{"invalid UTF-8 field", "{\"actor\":\"did:\xfe\"}", "", "actor", "invalid UTF-8"},
		{"underflow in body", `{"body":{"n":1e-400}}`, "", "body.n", "cannot be kept exactly"},
		{"underflow under a root", `[1e-400]`, "x", "x[0]", "cannot be kept exactly"},
		{"not JSON", `{"a":`, "", "", "not JSON: unexpected end of input"},
		{"empty", ``, "req", "req", "not JSON: empty input"},
		{"two values", `{} 1`, "", "", "not JSON: data after the value"},
		{"too deep", strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), "", "", "not JSON: nested more than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckJSON([]byte(tt.json), tt.root)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("CheckJSON(%s)=%v, want nil", tt.json, err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("CheckJSON(%s)=%v, want a *FieldError", tt.json, err)
			}
			if got, want := fe.Field, tt.field; got != want {
				t.Fatalf("Field=%q, want %q", got, want)
			}
			if !strings.Contains(fe.Rule, tt.rule) {
				t.Fatalf("Rule=%q, want it to contain %q", fe.Rule, tt.rule)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("CheckJSON(%s)=%v, want it to wrap ErrInvalid", tt.json, err)
			}
		})
	}
}

// Every JSON document encoding/json accepts without changing it, the
// strict reader reads to the same values: the rules refuse, they never
// reinterpret.
func TestReadJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"a":[1,-2,0.5,1e300,"s\u00e9\n",true,null,{"b":{}}],"c":"日本 🎉","d":-0.0,"e":1E+2}`,
		`{"big":18446744073709551615,"neg":-9223372036854775808,"esc":"\ud83c\udf89\/"}`,
	} {
		got, err := readJSON([]byte(in), "body")
		if err != nil {
			t.Fatalf("readJSON(%s): %v", in, err)
		}
		var want any
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if g, w := fmt.Sprint(normalize(got)), fmt.Sprint(normalize(want)); g != w {
			t.Fatalf("readJSON(%s)=%s, want %s", in, g, w)
		}
	}
}

// normalize maps the numbers of a decoded JSON value to their float64
// text, so that the two readers' number types compare.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = normalize(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = normalize(e)
		}
		return a
	case json.Number:
		f, _ := strconv.ParseFloat(string(v), 64)
		return strconv.FormatFloat(f, 'g', -1, 64)
	case int64, uint64, float64:
		f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v
}
