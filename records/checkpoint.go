package records

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// Checkpoint body keys (wire format; never change).
const (
	keySummary   = "summary"
	keyLearnings = "learnings"
	keyNextSteps = "next_steps"
	keySessionID = "session_id"
	keyName      = "name"
)

// Checkpoint limits.
const maxSummaryLen = 8 << 10

// Checkpoint is the body of a [KindCheckpoint] record (act [ActLearn]). It
// encodes as one flat CBOR map holding the keys named beside each field
// plus the keys of Extra.
type Checkpoint struct {
	Summary   string   // "summary": non-empty, at most 8 KiB (8192 bytes)
	Learnings []string // "learnings": at least one, each non-empty; absent when nil
	NextSteps []string // "next_steps": may be empty; absent when nil
	// NextStepsText says that "next_steps" is one text string rather than
	// an array (as the session-checkpoints page writes it): NextSteps then
	// holds that string as its one item, and the body keeps the string as
	// given, never turned into a list (decoding and encoding again gives
	// the same bytes).
	NextStepsText bool
	SessionID     string // "session_id": absent when empty
	Name          string // "name": absent when empty
	// Lineage (records/lineage.go); every one absent when zero.
	Parent     ID             // "parent": the previous checkpoint of its branch, as id text
	State      map[string]any // "state": structured state, a map with text keys
	ForkedFrom *ForkLink      // "forked_from": the checkpoint of another thread a fork starts from
	Extra      map[string]any // any other body keys, kept and re-encoded as given
}

// isCheckpointKey reports whether k is a key of a Checkpoint field.
func isCheckpointKey(k string) bool {
	switch k {
	case keySummary, keyLearnings, keyNextSteps, keySessionID, keyName:
		return true
	}
	return isLineageKey(k)
}

// MarshalCBOR encodes c as a canonical CBOR map. It fails if a key of Extra
// is the key of a field.
func (c Checkpoint) MarshalCBOR() ([]byte, error) {
	if c.flat() {
		return c.appendCBOR(make([]byte, 0, c.sizeHint())), nil
	}
	return c.marshalMap()
}

// flat reports whether c holds text fields only (no Extra, State or
// ForkedFrom): what appendCBOR encodes.
func (c Checkpoint) flat() bool {
	return len(c.Extra) == 0 && c.State == nil && c.ForkedFrom == nil
}

// marshalMap encodes c through a map and the generic encoder: the
// reference that appendCBOR matches, and the path for Extra.
func (c Checkpoint) marshalMap() ([]byte, error) {
	m := make(map[string]any, len(c.Extra)+8)
	for k, v := range c.Extra {
		// A lineage key in Extra holds a value of the wrong type, read
		// from a stored body: re-encoded as it was (Validate refuses it).
		if isCheckpointKey(k) && !isLineageKey(k) {
			return nil, fmt.Errorf("encode checkpoint: %w",
				fieldErrorf("body."+k, "is a checkpoint field; set it on Checkpoint, not in Extra"))
		}
		m[k] = v
	}
	m[keySummary] = c.Summary
	if c.Learnings != nil {
		m[keyLearnings] = c.Learnings
	}
	if c.NextStepsText && len(c.NextSteps) == 1 {
		m[keyNextSteps] = c.NextSteps[0]
	} else if c.NextSteps != nil {
		m[keyNextSteps] = c.NextSteps
	}
	if c.SessionID != "" {
		m[keySessionID] = c.SessionID
	}
	if c.Name != "" {
		m[keyName] = c.Name
	}
	for k, v := range map[string]any{keyParent: c.Parent, keyState: c.State, keyForkedFrom: c.ForkedFrom} {
		switch v := v.(type) {
		case ID:
			if v.IsZero() {
				continue
			}
			m[k] = v.String()
		case map[string]any:
			if v == nil {
				continue
			}
			m[k] = v
		case *ForkLink:
			if v == nil {
				continue
			}
			m[k] = v.cbor()
		}
		if _, dup := c.Extra[k]; dup {
			return nil, fmt.Errorf("encode checkpoint: %w",
				fieldErrorf("body."+k, "is a checkpoint field; set it on Checkpoint, not in Extra"))
		}
	}
	return encMode.Marshal(m)
}

// appendCBOR appends c, without Extra, State and ForkedFrom, as the
// canonical map the generic encoder makes of it, with no reflection and
// no map: saving checkpoints is the hot path. The keys go in canonical
// order (shorter first, then bytewise): name, parent, summary, learnings,
// next_steps, session_id.
// TestCheckpointEncodings holds it to the generic encoder.
func (c Checkpoint) appendCBOR(b []byte) []byte {
	n := uint64(1)
	if c.Learnings != nil {
		n++
	}
	if c.NextSteps != nil {
		n++
	}
	if c.SessionID != "" {
		n++
	}
	if c.Name != "" {
		n++
	}
	if !c.Parent.IsZero() {
		n++
	}
	b = appendHead(b, majorMap, n)
	if c.Name != "" {
		b = appendText(appendText(b, keyName), c.Name)
	}
	if !c.Parent.IsZero() {
		b = appendText(appendText(b, keyParent), c.Parent.String())
	}
	b = appendText(appendText(b, keySummary), c.Summary)
	if c.Learnings != nil {
		b = appendTexts(appendText(b, keyLearnings), c.Learnings)
	}
	if c.NextStepsText && len(c.NextSteps) == 1 {
		b = appendText(appendText(b, keyNextSteps), c.NextSteps[0])
	} else if c.NextSteps != nil {
		b = appendTexts(appendText(b, keyNextSteps), c.NextSteps)
	}
	if c.SessionID != "" {
		b = appendText(appendText(b, keySessionID), c.SessionID)
	}
	return b
}

// appendTexts appends a CBOR array of text strings.
func appendTexts(b []byte, ss []string) []byte {
	b = appendHead(b, majorArray, uint64(len(ss)))
	for _, s := range ss {
		b = appendText(b, s)
	}
	return b
}

// sizeHint is about the encoded size of c without Extra.
func (c Checkpoint) sizeHint() int {
	n := 128 + len(c.Summary) + len(c.SessionID) + len(c.Name)
	for _, ss := range [][]string{c.Learnings, c.NextSteps} {
		for _, s := range ss {
			n += 9 + len(s)
		}
	}
	return n
}

// UnmarshalCBOR decodes a checkpoint body as [DecodeCheckpoint] does.
func (c *Checkpoint) UnmarshalCBOR(data []byte) error {
	d, err := DecodeCheckpoint(data)
	if err != nil {
		return err
	}
	*c = *d
	return nil
}

// DecodeCheckpoint strictly decodes a checkpoint body. Bytes that are not a
// canonical CBOR map are an error wrapping [ErrCorrupt]; a key of the wrong
// type is a *FieldError naming it ("body.summary", "body.learnings[2]").
// Keys other than the fields' go to Extra as generic values (maps as
// map[any]any, integers as uint64 or int64, byte strings as []byte), so
// that encoding the result again gives the same bytes. DecodeCheckpoint
// does not apply [Checkpoint.Validate].
func DecodeCheckpoint(body []byte) (*Checkpoint, error) {
	if c, ok := decodeCheckpointDirect(body); ok {
		return c, nil
	}
	return decodeCheckpointGeneric(body)
}

// decodeCheckpointGeneric is DecodeCheckpoint through generic values: the
// reference, and the path for Extra and for every error.
func decodeCheckpointGeneric(body []byte) (*Checkpoint, error) {
	m, err := decodeBodyMap(body)
	if err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		s, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("decode checkpoint: %w",
				fieldErrorf("body", "keys must be text strings, got a %s key", goCBORType(k)))
		}
		keys = append(keys, s)
	}
	slices.Sort(keys)
	c := &Checkpoint{}
	for _, k := range keys {
		v := m[k]
		switch k {
		case keySummary, keySessionID, keyName:
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("decode checkpoint: %w",
					fieldErrorf("body."+k, "must be a text string, got %s", goCBORType(v)))
			}
			*c.textField(k) = s
		case keyLearnings, keyNextSteps:
			if s, ok := v.(string); ok && k == keyNextSteps {
				c.NextSteps, c.NextStepsText = []string{s}, true
				continue
			}
			list, err := stringList("body."+k, v)
			if err != nil {
				return nil, fmt.Errorf("decode checkpoint: %w", err)
			}
			*c.listField(k) = list
		default:
			if c.decodeLineageKey(k, v) {
				continue
			}
			if c.Extra == nil {
				c.Extra = make(map[string]any)
			}
			c.Extra[k] = v
		}
	}
	return c, nil
}

// decodeCheckpointDirect decodes body without generic values when the
// scanner accepts it as canonical and it holds the fields' keys only,
// each with its field's type: what every checkpoint the sdk saves is, and
// what every latest-checkpoint read decodes. It reports false for
// anything else, which DecodeCheckpoint then decodes (or refuses) through
// the generic decoder; FuzzDecodeCheckpoint holds the two to the same
// result.
func decodeCheckpointDirect(body []byte) (*Checkpoint, bool) {
	if !scanBodyMap(body) {
		return nil, false
	}
	// Canonical: every head is well-formed and in bounds, every text is
	// valid UTF-8, keys are unique and sorted.
	_, pairs, off, _ := scanHead(body)
	text := func() (string, bool) {
		major, n, hl, _ := scanHead(body[off:])
		if major != majorText {
			return "", false
		}
		s := string(body[off+hl : off+hl+int(n)])
		off += hl + int(n)
		return s, true
	}
	c := &Checkpoint{}
	for range pairs {
		k, ok := text()
		if !ok {
			return nil, false
		}
		switch k {
		case keySummary, keySessionID, keyName:
			v, ok := text()
			if !ok {
				return nil, false
			}
			*c.textField(k) = v
		case keyLearnings, keyNextSteps:
			major, n, hl, _ := scanHead(body[off:])
			if major == majorText && k == keyNextSteps {
				v, _ := text()
				c.NextSteps, c.NextStepsText = []string{v}, true
				continue
			}
			if major != majorArray {
				return nil, false
			}
			off += hl
			list := make([]string, n)
			for i := range list {
				if list[i], ok = text(); !ok {
					return nil, false
				}
			}
			*c.listField(k) = list
		case keyParent:
			v, ok := text()
			if !ok {
				return nil, false
			}
			if c.Parent, ok = canonicalID(v); !ok {
				return nil, false // in Extra: the generic path
			}
		default:
			return nil, false // State, ForkedFrom, Extra: generic values
		}
	}
	return c, true
}

// textField returns the field of text key k: summary, session_id or name.
func (c *Checkpoint) textField(k string) *string {
	switch k {
	case keySummary:
		return &c.Summary
	case keySessionID:
		return &c.SessionID
	}
	return &c.Name
}

// listField returns the field of list key k: learnings or next_steps.
func (c *Checkpoint) listField(k string) *[]string {
	if k == keyLearnings {
		return &c.Learnings
	}
	return &c.NextSteps
}

// checkHeader checks the keys of a checkpoint body that repeat its
// record's header (the session-checkpoints page writes them in the body):
// "thread" and "actor", when given, must be text equal to the header's;
// "session_id" is the checkpoint's own field. A mismatch is refused
// naming the field, so a body never says something its header does not.
func (c *Checkpoint) checkHeader(h Header) error {
	for _, f := range []struct{ key, want string }{{"thread", h.Thread}, {"actor", h.Actor}} {
		v, ok := c.Extra[f.key]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fieldErrorf("body."+f.key, "must be a text string equal to the header's %s, got %s", f.key, goCBORType(v))
		}
		if s != f.want {
			return fieldErrorf("body."+f.key, "must equal the record's %s %s when given, got %s", f.key, quote(f.want), quote(s))
		}
	}
	return nil
}

// stringList converts a generic array of text strings.
func stringList(field string, v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fieldErrorf(field, "must be an array of text strings, got %s", goCBORType(v))
	}
	list := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, fieldErrorf(fmt.Sprintf("%s[%d]", field, i), "must be a text string, got %s", goCBORType(e))
		}
		list[i] = s
	}
	return list, nil
}

// Validate checks the checkpoint schema and returns the first failure as a
// *FieldError: "body.summary" (non-empty, at most 8192 bytes),
// "body.learnings" (at least one), "body.learnings[i]" (non-empty), any
// field's string that is not valid UTF-8 (CBOR text must be), or
// "body.<key>" for an Extra key that is a field's key; then the lineage
// fields: "body.forked_from.thread" (the header's thread rule),
// "body.forked_from.id", "body.forked_from.clock" (at least 1), and
// "body.parent", "body.state" or "body.forked_from" for a value of the
// wrong type.
func (c *Checkpoint) Validate() error {
	switch {
	case c.Summary == "":
		return fieldErrorf("body.summary", "must not be empty")
	case len(c.Summary) > maxSummaryLen:
		return fieldErrorf("body.summary", "must be at most %d bytes, got %d", maxSummaryLen, len(c.Summary))
	case len(c.Learnings) == 0:
		return fieldErrorf("body.learnings", "must have at least one entry")
	case c.NextStepsText && len(c.NextSteps) != 1:
		return fieldErrorf("body.next_steps", "is one text string (NextStepsText), so NextSteps must hold exactly one item, got %d", len(c.NextSteps))
	}
	for i, l := range c.Learnings {
		if l == "" {
			return fieldErrorf(fmt.Sprintf("body.learnings[%d]", i), "must not be empty")
		}
	}
	if err := c.checkUTF8(); err != nil {
		return err
	}
	if err := c.validateLineage(); err != nil {
		return err
	}
	keys := make([]string, 0, len(c.Extra))
	for k := range c.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if isCheckpointKey(k) && !isLineageKey(k) {
			return fieldErrorf("body."+k, "is a checkpoint field; set it on Checkpoint, not in Extra")
		}
	}
	return nil
}

// checkUTF8 refuses a field's string that is not valid UTF-8: encoded, it
// would be a CBOR text string no reader accepts.
func (c *Checkpoint) checkUTF8() error {
	for _, f := range []struct {
		key string
		s   string
	}{{keySummary, c.Summary}, {keySessionID, c.SessionID}, {keyName, c.Name}} {
		if !utf8.ValidString(f.s) {
			return fieldErrorf("body."+f.key, "must be valid UTF-8")
		}
	}
	for _, l := range []struct {
		key string
		ss  []string
	}{{keyLearnings, c.Learnings}, {keyNextSteps, c.NextSteps}} {
		for i, s := range l.ss {
			if !utf8.ValidString(s) {
				return fieldErrorf(fmt.Sprintf("body.%s[%d]", l.key, i), "must be valid UTF-8")
			}
		}
	}
	return nil
}
