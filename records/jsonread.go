package records

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the one strict JSON reader of spl: every face that takes
// JSON (the CLI's bodies through BodyFromJSON, the HTTP API's requests
// through CheckJSON) reads it here, so that input is refused, never
// silently changed. encoding/json keeps the last of two equal keys, turns
// invalid UTF-8 and lone UTF-16 surrogates into U+FFFD and a number such as
// 1e-400 into 0; this reader refuses each, naming the path of the value
// and the reason.
//
// The number rule is how a body keeps numbers (see BodyFromJSON): a number
// without '.', 'e' or 'E' is an integer and must fit CBOR's integers
// (-2^64 to 2^64-1); any other number becomes the nearest float64, as in
// every JSON reader, and must neither overflow (±Inf) nor underflow to
// zero when its digits are not all zero.

// maxJSONDepth bounds the nesting of arrays and objects the reader
// follows, as encoding/json does. Bodies are bounded far lower by the
// CBOR decoder (MaxNestedLevels).
const maxJSONDepth = 10000

// CheckJSON reports the first value of data, one JSON value, that a JSON
// decoder would silently change: a duplicate key, a string or key that is
// not valid UTF-8 or holds a lone UTF-16 surrogate, a number that cannot be
// kept exactly (see [BodyFromJSON]). The error is a *FieldError whose Field
// is the path of the value under root: root "body" names the key "a" of
// the top-level object "body.a"; root "" names it "a". Input that is not
// one JSON value is a *FieldError with Field root and a Rule starting with
// "not JSON: ".
//
// Decoders of JSON (the HTTP API's request decoding) call CheckJSON before
// encoding/json, so that what encoding/json then decodes is what was sent.
func CheckJSON(data []byte, root string) error {
	if _, err := readJSON(data, root); err != nil {
		if se, ok := err.(*jsonSyntaxError); ok {
			return &FieldError{Field: root, Rule: "not JSON: " + se.msg}
		}
		return err
	}
	return nil
}

// jsonSyntaxError is input that is not one JSON value.
type jsonSyntaxError struct{ msg string }

func (e *jsonSyntaxError) Error() string { return e.msg }

// readJSON reads data, one JSON value, under the rules above. Objects
// become map[string]any; arrays []any; numbers int64, uint64, big.Int
// (negative, down to -2^64) or float64; strings, booleans and null string,
// bool and nil. A value the rules refuse is a *FieldError naming its path
// under root; input that is not JSON is a *jsonSyntaxError.
func readJSON(data []byte, root string) (any, error) {
	r := &jsonReader{data: data}
	r.space()
	if r.pos == len(data) {
		return nil, &jsonSyntaxError{"empty input"}
	}
	v, err := r.value(root, 0)
	if err != nil {
		return nil, err
	}
	r.space()
	if r.pos != len(data) {
		return nil, &jsonSyntaxError{fmt.Sprintf("data after the value at offset %d", r.pos)}
	}
	return v, nil
}

type jsonReader struct {
	data []byte
	pos  int
}

func (r *jsonReader) space() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

func (r *jsonReader) syntax(what string) error {
	if r.pos >= len(r.data) {
		return &jsonSyntaxError{"unexpected end of input, " + what}
	}
	return &jsonSyntaxError{fmt.Sprintf("invalid character %q at offset %d, %s", r.data[r.pos], r.pos, what)}
}

// jsonChild is the path of the key k of the object at path.
func jsonChild(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (r *jsonReader) value(path string, depth int) (any, error) {
	if r.pos >= len(r.data) {
		return nil, r.syntax("looking for a value")
	}
	switch c := r.data[r.pos]; {
	case c == '{':
		return r.object(path, depth+1)
	case c == '[':
		return r.array(path, depth+1)
	case c == '"':
		s, err := r.str()
		if se, ok := err.(*stringError); ok {
			return nil, &FieldError{Field: path, Rule: se.rule}
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return r.number(path)
	}
	for _, lit := range []struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if strings.HasPrefix(string(r.data[r.pos:min(len(r.data), r.pos+len(lit.text))]), lit.text) {
			r.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, r.syntax("looking for a value")
}

func (r *jsonReader) object(path string, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, &jsonSyntaxError{fmt.Sprintf("nested more than %d deep at offset %d", maxJSONDepth, r.pos)}
	}
	r.pos++ // '{'
	m := make(map[string]any)
	r.space()
	if r.pos < len(r.data) && r.data[r.pos] == '}' {
		r.pos++
		return m, nil
	}
	for {
		r.space()
		if r.pos >= len(r.data) || r.data[r.pos] != '"' {
			return nil, r.syntax("looking for a key")
		}
		k, err := r.str()
		if err != nil {
			return nil, wrapKeyError(path, err)
		}
		if _, dup := m[k]; dup {
			return nil, fieldErrorf(jsonChild(path, k), "duplicate key %s", quote(k))
		}
		r.space()
		if r.pos >= len(r.data) || r.data[r.pos] != ':' {
			return nil, r.syntax("looking for ':' after a key")
		}
		r.pos++
		r.space()
		v, err := r.value(jsonChild(path, k), depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		r.space()
		if r.pos < len(r.data) && r.data[r.pos] == ',' {
			r.pos++
			continue
		}
		if r.pos < len(r.data) && r.data[r.pos] == '}' {
			r.pos++
			return m, nil
		}
		return nil, r.syntax("looking for ',' or '}'")
	}
}

func (r *jsonReader) array(path string, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, &jsonSyntaxError{fmt.Sprintf("nested more than %d deep at offset %d", maxJSONDepth, r.pos)}
	}
	r.pos++ // '['
	a := []any{}
	r.space()
	if r.pos < len(r.data) && r.data[r.pos] == ']' {
		r.pos++
		return a, nil
	}
	for {
		r.space()
		v, err := r.value(fmt.Sprintf("%s[%d]", path, len(a)), depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		r.space()
		if r.pos < len(r.data) && r.data[r.pos] == ',' {
			r.pos++
			continue
		}
		if r.pos < len(r.data) && r.data[r.pos] == ']' {
			r.pos++
			return a, nil
		}
		return nil, r.syntax("looking for ',' or ']'")
	}
}

// stringError is a string that is JSON but that a decoder would change;
// prefix is the string's input up to and including the offending byte or
// escape.
type stringError struct {
	rule   string
	prefix []byte
}

func (e *stringError) Error() string { return e.rule }

// wrapKeyError names a key that is refused by the path of the object
// holding it and the key as far as the offending byte, quoted (\xff for an
// invalid byte): body."a\xff".
func wrapKeyError(path string, err error) error {
	se, ok := err.(*stringError)
	if !ok {
		return err
	}
	return &FieldError{Field: jsonChild(path, strconv.Quote(string(se.prefix))), Rule: "key: " + se.rule}
}

// str reads a string at r.pos (a '"'), refusing invalid UTF-8 and lone
// surrogates with a *stringError.
func (r *jsonReader) str() (string, error) {
	r.pos++ // '"'
	begin, start := r.pos, r.pos
	var b *strings.Builder // only when the string has escapes
	for {
		if r.pos >= len(r.data) {
			return "", r.syntax("in a string")
		}
		c := r.data[r.pos]
		switch {
		case c == '"':
			s := string(r.data[start:r.pos])
			if b != nil {
				b.WriteString(s)
				s = b.String()
			}
			r.pos++
			return s, nil
		case c < 0x20:
			return "", r.syntax("in a string (control characters must be escaped)")
		case c == '\\':
			if b == nil {
				b = new(strings.Builder)
			}
			b.Write(r.data[start:r.pos])
			if err := r.escape(b); err != nil {
				if se, ok := err.(*stringError); ok {
					se.prefix = r.data[begin:r.pos]
				}
				return "", err
			}
			start = r.pos
		case c < utf8.RuneSelf:
			r.pos++
		default:
			ru, n := utf8.DecodeRune(r.data[r.pos:])
			if ru == utf8.RuneError && n == 1 {
				return "", &stringError{rule: fmt.Sprintf("invalid UTF-8 (byte %#x at offset %d)", c, r.pos), prefix: r.data[begin : r.pos+1]}
			}
			r.pos += n
		}
	}
}

// escape reads one escape sequence at r.pos (a '\\') into b.
func (r *jsonReader) escape(b *strings.Builder) error {
	r.pos++ // '\\'
	if r.pos >= len(r.data) {
		return r.syntax("in an escape")
	}
	c := r.data[r.pos]
	if c != 'u' {
		i := strings.IndexByte(`"\/bfnrt`, c)
		if i < 0 {
			return r.syntax("in an escape")
		}
		b.WriteByte("\"\\/\b\f\n\r\t"[i])
		r.pos++
		return nil
	}
	u, err := r.hex4()
	if err != nil {
		return err
	}
	if !utf16.IsSurrogate(u) {
		b.WriteRune(u)
		return nil
	}
	if u < 0xdc00 && r.pos+1 < len(r.data) && r.data[r.pos] == '\\' && r.data[r.pos+1] == 'u' {
		save := r.pos
		r.pos++
		lo, err := r.hex4()
		if err != nil {
			return err
		}
		if ru := utf16.DecodeRune(u, lo); ru != utf8.RuneError {
			b.WriteRune(ru)
			return nil
		}
		r.pos = save
	}
	return &stringError{rule: fmt.Sprintf(`lone surrogate \u%04x`, u)}
}

// hex4 reads the 4 hex digits of a \u escape at r.pos (the 'u').
func (r *jsonReader) hex4() (rune, error) {
	r.pos++ // 'u'
	if r.pos+4 > len(r.data) {
		r.pos = len(r.data)
		return 0, r.syntax(`in a \u escape`)
	}
	n, err := strconv.ParseUint(string(r.data[r.pos:r.pos+4]), 16, 16)
	if err != nil || strings.ContainsAny(string(r.data[r.pos:r.pos+4]), "+-_xX") {
		return 0, r.syntax(`in a \u escape`)
	}
	r.pos += 4
	return rune(n), nil
}

// number reads a number at r.pos and applies the number rule.
func (r *jsonReader) number(path string) (any, error) {
	start := r.pos
	digits := func() int {
		n := 0
		for r.pos < len(r.data) && '0' <= r.data[r.pos] && r.data[r.pos] <= '9' {
			r.pos++
			n++
		}
		return n
	}
	if r.data[r.pos] == '-' {
		r.pos++
	}
	intStart := r.pos
	if n := digits(); n == 0 || (n > 1 && r.data[intStart] == '0') {
		if n == 0 {
			return nil, r.syntax("in a number")
		}
		r.pos = intStart + 1
		return nil, r.syntax("after a leading 0")
	}
	mantEnd := r.pos
	isFloat := false
	if r.pos < len(r.data) && r.data[r.pos] == '.' {
		r.pos++
		if digits() == 0 {
			return nil, r.syntax("in the fraction of a number")
		}
		isFloat, mantEnd = true, r.pos
	}
	if r.pos < len(r.data) && (r.data[r.pos] == 'e' || r.data[r.pos] == 'E') {
		r.pos++
		if r.pos < len(r.data) && (r.data[r.pos] == '+' || r.data[r.pos] == '-') {
			r.pos++
		}
		if digits() == 0 {
			return nil, r.syntax("in the exponent of a number")
		}
		isFloat = true
	}
	s := string(r.data[start:r.pos])
	if !isFloat {
		if s == "-0" {
			return nil, fieldErrorf(path, "integer \"-0\" cannot be kept exactly: an integer has no negative zero (send 0, or -0.0 for the float)")
		}
		return jsonInteger(path, s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fieldErrorf(path, "number %s cannot be kept exactly: it is beyond the float64 range", quote(s))
	}
	if f == 0 && strings.ContainsAny(string(r.data[start:mantEnd]), "123456789") {
		return nil, fieldErrorf(path, "number %s cannot be kept exactly: it is too small for a float64 and would become 0", quote(s))
	}
	if kept := strconv.FormatFloat(f, 'g', -1, 64); !sameDecimal(s, kept) {
		return nil, fieldErrorf(path, "number %s cannot be kept exactly: it has more precision than a float64, which would keep %s (send that, or the number as a string)", quote(s), kept)
	}
	return f, nil
}

// sameDecimal reports whether the JSON number literals a and b have the
// same decimal value ("1.50" and "1.5e0" do; "0.10000000000000001" and
// "0.1" do not). A float literal is kept when it equals the shortest text
// of the float64 it becomes: then the value written is the value read
// back, to the last digit.
func sameDecimal(a, b string) bool {
	an, ad, ae := decimalOf(a)
	bn, bd, be := decimalOf(b)
	if ad == "" || bd == "" { // zero: its sign is the float's, kept apart
		return ad == bd
	}
	return an == bn && ad == bd && ae == be
}

// decimalOf splits a number literal into its sign, its significant digits
// (no leading or trailing zeros; "" for zero) and the exponent e of its
// value 0.digits × 10^e. An exponent beyond ±10^9 is clamped: the
// literal is then far outside the float64 range, refused before.
func decimalOf(s string) (neg bool, digits string, exp int) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, e := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		x := strings.TrimPrefix(s[i+1:], "+")
		n, err := strconv.Atoi(x)
		switch {
		case err == nil && n > -1e9 && n < 1e9:
			e = n
		case strings.HasPrefix(x, "-"):
			e = -1e9
		default:
			e = 1e9
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	e += len(intPart)
	trimmed := strings.TrimLeft(all, "0")
	e -= len(all) - len(trimmed)
	return neg, strings.TrimRight(trimmed, "0"), e
}

// minCBORInt is -2^64, the smallest integer CBOR encodes without a tag.
var minCBORInt = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64))

// jsonInteger applies the number rule to an integer literal s.
func jsonInteger(path, s string) (any, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	// CBOR's own range reaches down to -2^64 (major type 1): 21 characters
	// with the sign, so longer literals need no big.Int to be refused.
	if len(s) <= len("-18446744073709551616") {
		if b, ok := new(big.Int).SetString(s, 10); ok && b.Sign() < 0 && b.Cmp(minCBORInt) >= 0 {
			return *b, nil
		}
	}
	return nil, fieldErrorf(path, "integer %s is out of range [-18446744073709551616, 18446744073709551615]", quote(s))
}
