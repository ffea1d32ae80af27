package records

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// BodyFromJSON converts a JSON object to the canonical CBOR bytes of a body
// map, for the faces (the CLI, the HTTP API) that take bodies as JSON.
//
// The JSON is read strictly (CheckJSON): input that a JSON decoder would
// silently change is refused with a *FieldError naming the path of the
// value ("body.usage.tokens") and the reason: a duplicate key, a string
// or key that is not valid UTF-8 or holds a lone UTF-16 surrogate, or a
// number that cannot be kept exactly.
//
// Numbers without '.', 'e' or 'E' become CBOR integers; one outside
// -2^64 to 2^64-1, and -0, are refused. Other numbers become the nearest
// float64 (encoded in its shortest exact float form) when that float is
// the value written: one beyond the float64 range, one whose digits are
// not all zero that would become 0, and one whose float's shortest text
// has another value (3.141592653589793238, 0.10000000000000001) are
// refused.
// Strings, booleans, null, arrays and nested objects map to their CBOR
// counterparts. Input that is not one JSON object is a
// *FieldError{Field: "body", Rule: "must be a JSON object: …"}.
func BodyFromJSON(data []byte) ([]byte, error) { return ObjectFromJSON(data, "body") }

// ObjectFromJSON is BodyFromJSON for a JSON object held in field (a path
// such as "checkpoints[2].payload"), whose errors name that field.
func ObjectFromJSON(data []byte, field string) ([]byte, error) {
	i := 0
	for i < len(data) && strings.IndexByte(" \t\r\n", data[i]) >= 0 {
		i++
	}
	if i < len(data) && data[i] != '{' {
		if t := jsonType(data[i]); t != "" {
			return nil, notJSONObject(field, "got "+t)
		}
	}
	v, err := readJSON(data, field)
	if err != nil {
		var se *jsonSyntaxError
		if errors.As(err, &se) {
			return nil, notJSONObject(field, se.msg)
		}
		return nil, err
	}
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fieldErrorf(field, "cannot encode as CBOR: %v", err)
	}
	if err := checkBodyMap(b); err != nil { // e.g. nested too deeply
		return nil, asFieldError(err)
	}
	return b, nil
}

// MapFromJSON is ObjectFromJSON's object as the generic values a body
// holds (integers as int64 or uint64, maps with string keys).
func MapFromJSON(data []byte, field string) (map[string]any, error) {
	b, err := ObjectFromJSON(data, field)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decMode.Unmarshal(b, &m); err != nil {
		return nil, fieldErrorf(field, "cannot decode: %v", err)
	}
	return m, nil
}

func notJSONObject(field, why string) *FieldError {
	return &FieldError{Field: field, Rule: "must be a JSON object: " + why}
}

// jsonType names the JSON value that starts with c, "" when none does.
func jsonType(c byte) string {
	switch {
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || ('0' <= c && c <= '9'):
		return "a number"
	case c == '"':
		return "a string"
	case c == '[':
		return "an array"
	}
	return ""
}

// BodyToJSON converts a body (a canonical CBOR map) to a JSON object. Byte
// strings become base64 (standard, padded) strings; map keys that are not
// text strings become their text (integers and floats in decimal, byte
// strings in base64, null as "null"). Bytes that are not a canonical CBOR
// map are an error wrapping [ErrCorrupt]; two keys of one map that convert
// to the same text are a *FieldError.
func BodyToJSON(body []byte) ([]byte, error) {
	m, err := decodeBodyMap(body)
	if err != nil {
		return nil, fmt.Errorf("body to json: %w", err)
	}
	v, err := toJSON("body", m)
	if err != nil {
		return nil, fmt.Errorf("body to json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("body to json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// toJSON converts a generic decoded CBOR value to one encoding/json writes.
func toJSON(path string, v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			ks := jsonKey(k)
			if _, dup := m[ks]; dup {
				return nil, fieldErrorf(path, "two keys convert to the JSON key %s", quote(ks))
			}
			c, err := toJSON(path+"."+ks, e)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			c, err := toJSON(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case []byte:
		return base64.StdEncoding.EncodeToString(v), nil
	case big.Int:
		return json.Number(v.String()), nil
	case *big.Int:
		return json.Number(v.String()), nil
	case float64:
		if v == 0 && math.Signbit(v) {
			return json.Number("-0.0"), nil // "-0" would read back as the integer 0, which has no sign
		}
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
	case string, bool, nil, uint64, int64:
		return v, nil
	}
	return nil, fieldErrorf(path, "cannot convert a %T to JSON", v)
}

// jsonKey is the JSON text of a CBOR map key.
func jsonKey(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case cbor.ByteString:
		return base64.StdEncoding.EncodeToString([]byte(k))
	case float64:
		return strconv.FormatFloat(k, 'g', -1, 64)
	case nil:
		return "null"
	case big.Int:
		return k.String()
	}
	return fmt.Sprint(k)
}
