package records

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// BodyFromJSON converts a JSON object to the canonical CBOR bytes of a body
// map, for callers (the CLI) that take bodies as JSON.
//
// Numbers without '.', 'e' or 'E' become CBOR integers; one outside the
// int64 and uint64 ranges is a *FieldError naming its path
// ("body.usage.tokens"). Other numbers become float64 values (encoded in
// their shortest exact float form). Strings, booleans, null, arrays and
// nested objects map to their CBOR counterparts. Input that is not one JSON
// object is a *FieldError{Field: "body", Rule: "must be a JSON object: …"}.
func BodyFromJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, notJSONObject("empty input")
		}
		return nil, notJSONObject(err.Error())
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		return nil, notJSONObject("data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, notJSONObject("got " + jsonType(v))
	}
	conv, err := fromJSON("body", obj)
	if err != nil {
		return nil, err
	}
	b, err := encMode.Marshal(conv)
	if err != nil {
		return nil, fieldErrorf("body", "cannot encode as CBOR: %v", err)
	}
	if _, err := decodeBodyMap(b); err != nil { // e.g. nested too deeply
		return nil, asFieldError(err)
	}
	return b, nil
}

func notJSONObject(why string) *FieldError {
	return &FieldError{Field: "body", Rule: "must be a JSON object: " + why}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// fromJSON converts a value decoded with UseNumber to a value to encode.
func fromJSON(path string, v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first error reported does not depend on map order
		m := make(map[string]any, len(v))
		for _, k := range keys {
			c, err := fromJSON(path+"."+k, v[k])
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			c, err := fromJSON(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case json.Number:
		return jsonNumber(path, string(v))
	}
	return v, nil // string, bool, nil
}

// minCBORInt is -2^64, the smallest integer CBOR encodes without a tag.
var minCBORInt = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64))

func jsonNumber(path, s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		// CBOR's own range reaches down to -2^64 (major type 1).
		if b, ok := new(big.Int).SetString(s, 10); ok && b.Sign() < 0 && b.Cmp(minCBORInt) >= 0 {
			return *b, nil
		}
		return nil, fieldErrorf(path, "integer %s is out of range [-18446744073709551616, 18446744073709551615]", quote(s))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fieldErrorf(path, "number %s is out of the float64 range", quote(s))
	}
	return f, nil
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
