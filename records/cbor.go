package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/fxamacker/cbor/v2"
)

// CBOR major types, shifted into the top three bits of an initial byte.
const (
	majorUint   = 0
	majorNegInt = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	majorMap    = 5
	majorTag    = 6
	majorSimple = 7
)

// Decoding limits. maxBodyDepth bounds the nesting of maps and arrays in a
// body (the body map itself is level 1); the envelope adds one level.
const (
	maxBodyDepth = 32
	maxElements  = 128 * 1024
)

var (
	// encMode is RFC 8949 core deterministic encoding (CoreDetEncOptions):
	// shortest integer and length arguments, shortest exact float,
	// definite lengths, map keys sorted bytewise by their encoding.
	encMode cbor.EncMode

	// decMode decodes bodies and headers strictly.
	decMode cbor.DecMode

	// envDecMode is decMode with room for the envelope's own map.
	envDecMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic("spl/records: core deterministic encoding options: " + err.Error())
	}
	if decMode, err = strictDecOptions(maxBodyDepth).DecMode(); err != nil {
		panic("spl/records: strict decoding options: " + err.Error())
	}
	if envDecMode, err = strictDecOptions(maxBodyDepth + 1).DecMode(); err != nil {
		panic("spl/records: strict decoding options: " + err.Error())
	}
}

// strictDecOptions returns the strict decoding profile: no duplicate map
// keys, no indefinite lengths, no tags, no NaN or infinity, valid UTF-8 text
// only, simple values limited to false, true and null, and bounded nesting
// and sizes.
func strictDecOptions(depth int) cbor.DecOptions {
	var rejected []func(*cbor.SimpleValueRegistry) error
	for sv := 0; sv < 256; sv++ {
		switch {
		case sv >= 24 && sv <= 31: // reserved; never well formed
		case sv == 20 || sv == 21 || sv == 22: // false, true, null
		default:
			rejected = append(rejected, cbor.WithRejectedSimpleValue(cbor.SimpleValue(sv)))
		}
	}
	simple, err := cbor.NewSimpleValueRegistryFromDefaults(rejected...)
	if err != nil {
		panic("spl/records: simple value registry: " + err.Error())
	}
	return cbor.DecOptions{
		DupMapKey:          cbor.DupMapKeyEnforcedAPF,
		IndefLength:        cbor.IndefLengthForbidden,
		TagsMd:             cbor.TagsForbidden,
		NaN:                cbor.NaNDecodeForbidden,
		Inf:                cbor.InfDecodeForbidden,
		UTF8:               cbor.UTF8RejectInvalid,
		MaxNestedLevels:    depth,
		MaxArrayElements:   maxElements,
		MaxMapPairs:        maxElements,
		IntDec:             cbor.IntDecConvertNone,
		BigIntDec:          cbor.BigIntDecodeValue,
		MapKeyByteString:   cbor.MapKeyByteStringAllowed,
		ByteStringToString: cbor.ByteStringToStringForbidden,
		SimpleValues:       simple,
		BinaryUnmarshaler:  cbor.BinaryUnmarshalerNone,
	}
}

// decodeCanonical strictly decodes one CBOR data item into a generic Go
// value and requires that re-encoding it with encMode gives back exactly
// data. Errors wrap ErrCorrupt.
//
// Generic values are: map[any]any, []any, string, []byte, uint64, int64,
// big.Int (negative integers below math.MinInt64), float64, bool, nil; map
// keys that are byte strings decode as cbor.ByteString.
func decodeCanonical(data []byte) (any, error) {
	var v any
	if n, ok := scanCanonical(data, maxBodyDepth); ok && n == len(data) {
		// Canonical already: decoding cannot fail, and encoding again
		// would give back data.
		if err := decMode.Unmarshal(data, &v); err == nil {
			return v, nil
		}
	}
	return decodeCanonicalReference(data)
}

// decodeCanonicalReference is decodeCanonical without the scanner: decode
// strictly, encode again, compare. It defines what the scanner accepts.
func decodeCanonicalReference(data []byte) (any, error) {
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return nil, corruptErr("strict CBOR", err)
	}
	re, err := encMode.Marshal(v)
	if err != nil {
		return nil, corruptErr("re-encode CBOR", err)
	}
	if !bytes.Equal(re, data) {
		return nil, corruptf("not canonical CBOR (RFC 8949 core deterministic)")
	}
	return v, nil
}

// decodeBodyMap is decodeCanonical for a body: the item must also be a map.
func decodeBodyMap(body []byte) (map[any]any, error) {
	if len(body) > 0 && body[0]>>5 != majorMap {
		return nil, corruptf("body is a CBOR %s, not a map", cborType(body))
	}
	v, err := decodeCanonical(body)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[any]any)
	if !ok {
		return nil, corruptf("body is a CBOR %s, not a map", cborType(body))
	}
	return m, nil
}

// checkBodyMap is decodeBodyMap for a caller that needs the verdict only:
// a body the scanner accepts whole is not decoded (the scanner accepts only
// what the reference accepts); any other goes through decodeBodyMap, which
// words the error.
func checkBodyMap(body []byte) error {
	if len(body) > 0 && body[0]>>5 == majorMap {
		if n, ok := scanCanonical(body, maxBodyDepth); ok && n == len(body) {
			return nil
		}
	}
	_, err := decodeBodyMap(body)
	return err
}

// cborType names the CBOR type of the item that data starts with.
func cborType(data []byte) string {
	if len(data) == 0 {
		return "empty input"
	}
	switch data[0] >> 5 {
	case majorUint:
		return "unsigned integer"
	case majorNegInt:
		return "negative integer"
	case majorBytes:
		return "byte string"
	case majorText:
		return "text string"
	case majorArray:
		return "array"
	case majorMap:
		return "map"
	case majorTag:
		return "tag"
	}
	switch data[0] {
	case 0xf4, 0xf5:
		return "bool"
	case 0xf6:
		return "null"
	case 0xf7:
		return "undefined"
	case 0xf9, 0xfa, 0xfb:
		return "float"
	}
	return "simple value"
}

// goCBORType names the CBOR type of a generic decoded value.
func goCBORType(v any) string {
	switch v := v.(type) {
	case uint64:
		return "unsigned integer"
	case int64:
		if v >= 0 {
			return "unsigned integer"
		}
		return "negative integer"
	case big.Int, *big.Int:
		return "negative integer"
	case []byte, cbor.ByteString:
		return "byte string"
	case string:
		return "text string"
	case []any:
		return "array"
	case map[any]any:
		return "map"
	case float64:
		return "float"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// appendHead appends a CBOR initial byte and argument n in its shortest form.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, m|27), n)
	}
}

// appendInt appends a CBOR integer (major type 0 or 1).
func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendHead(b, majorUint, uint64(v))
	}
	return appendHead(b, majorNegInt, uint64(^v)) // -1-v
}

// appendText appends a CBOR text string.
func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majorText, uint64(len(s))), s...)
}

// appendBytes appends a CBOR byte string.
func appendBytes(b, p []byte) []byte {
	return append(appendHead(b, majorBytes, uint64(len(p))), p...)
}

// rawOfType reports whether raw starts with an item of the given major type.
func rawOfType(raw []byte, major byte) bool {
	return len(raw) > 0 && raw[0]>>5 == major
}

// decodeText decodes raw, which must be a CBOR text string.
func decodeText(raw []byte) (string, bool) {
	if !rawOfType(raw, majorText) {
		return "", false
	}
	var s string
	if err := decMode.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// decodeByteString decodes raw, which must be a CBOR byte string.
func decodeByteString(raw []byte) ([]byte, bool) {
	if !rawOfType(raw, majorBytes) {
		return nil, false
	}
	var p []byte
	if err := decMode.Unmarshal(raw, &p); err != nil {
		return nil, false
	}
	return p, true
}
