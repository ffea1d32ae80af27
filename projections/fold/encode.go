package fold

import (
	"encoding/base32"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/spl-dev/spl/records"
)

// The values of Index are stored as encoding/json encodes them. Encoding
// them by reflection was most of the time of a fold, so they append
// themselves, byte for byte as encoding/json would (TestAppendJSON checks
// it): the same rules for strings (HTML-safe escapes, invalid UTF-8 as
// U+FFFD), struct fields in order, map keys sorted.

// jsonAppender is a Value that encodes itself.
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

var (
	_ jsonAppender = (*Thread)(nil)
	_ jsonAppender = (*Checkpoint)(nil)
	_ jsonAppender = (*Erased)(nil)
)

func (t *Thread) appendJSON(b []byte) []byte {
	b = append(b, `{"thread":`...)
	b = appendString(b, t.Thread)
	b = appendField(b, "records", t.Records)
	b = appendField(b, "checkpoints", t.Checkpoints)
	b = appendField(b, "first", t.First)
	b = append(b, `,"first_id":`...)
	b = appendID(b, t.FirstID)
	b = appendField(b, "last", t.Last)
	b = append(b, `,"last_id":`...)
	b = appendID(b, t.LastID)
	b = append(b, `,"last_actor":`...)
	b = appendString(b, t.LastActor)
	b = append(b, `,"last_ts":`...)
	b = strconv.AppendInt(b, t.LastTS, 10)
	b = append(b, `,"kinds":`...)
	b = appendCounts(b, t.Kinds)
	b = append(b, `,"actors":`...)
	b = appendCounts(b, t.Actors)
	if len(t.Gaps) > 0 {
		b = append(b, `,"gaps":[`...)
		for i, g := range t.Gaps {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"after":`...)
			b = strconv.AppendUint(b, g.After, 10)
			if g.AfterID != nil {
				b = append(b, `,"after_id":`...)
				b = appendID(b, *g.AfterID)
			}
			b = appendField(b, "before", g.Before)
			b = append(b, `,"top":`...)
			b = appendID(b, g.Top)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if ss := t.Session; ss != nil {
		b = append(b, `,"session":{"status":`...)
		b = appendString(b, ss.Status)
		b = append(b, `,"id":`...)
		b = appendID(b, ss.ID)
		b = appendField(b, "clock", ss.Clock)
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, ss.TS, 10)
		b = append(b, `,"kind":`...)
		b = appendString(b, ss.Kind)
		b = append(b, '}')
	}
	b = appendField(b, "as_of", t.AsOf)
	return append(b, '}')
}

func (c *Checkpoint) appendJSON(b []byte) []byte {
	b = append(b, `{"thread":`...)
	b = appendString(b, c.Thread)
	b = append(b, `,"id":`...)
	b = appendID(b, c.ID)
	b = appendField(b, "clock", c.Clock)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, c.TS, 10)
	b = append(b, `,"actor":`...)
	b = appendString(b, c.Actor)
	b = appendField(b, "as_of", c.AsOf)
	return append(b, '}')
}

func (e *Erased) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendID(b, e.ID)
	b = appendField(b, "clock", e.Clock)
	b = append(b, `,"thread":`...)
	b = appendString(b, e.Thread)
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	if e.Prev != nil {
		b = append(b, `,"prev":`...)
		b = appendID(b, *e.Prev)
	}
	b = append(b, `,"erasure":`...)
	b = appendID(b, e.Erasure)
	b = appendField(b, "erasure_clock", e.ErasureClock)
	b = append(b, `,"reason":`...)
	b = appendString(b, e.Reason)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, e.TS, 10)
	return append(b, '}')
}

// appendField appends ,"name":n.
func appendField(b []byte, name string, n uint64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendUint(b, n, 10)
}

// idText is the text form of an id: multibase 'b', base32 lower case.
var idText = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// appendID appends id as records.ID.MarshalText gives it, quoted.
func appendID(b []byte, id records.ID) []byte {
	var bin [36]byte
	copy(bin[:], []byte{0x01, 0x51, 0x1e, 0x20})
	copy(bin[4:], id[:])
	b = append(b, '"', 'b')
	b = idText.AppendEncode(b, bin[:])
	return append(b, '"')
}

// appendCounts appends m as an object with its keys sorted.
func appendCounts(b []byte, m map[string]uint64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var buf [8]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = strconv.AppendUint(b, m[k], 10)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it by default.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
