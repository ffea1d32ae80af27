package records

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"
)

var rewrite = flag.Bool("rewrite", false, "regenerate testdata/vectors.json and the FuzzUnmarshal seed corpus")

const vectorsFile = "testdata/vectors.json"

// vectorFile is the layout of testdata/vectors.json.
type vectorFile struct {
	Comment string   `json:"comment"`
	Vectors []vector `json:"vectors"`
}

type vector struct {
	Name        string       `json:"name"`
	Header      vectorHeader `json:"header"`
	BodyHex     string       `json:"body_hex"`
	BodyDiag    string       `json:"body_diag"`
	SaltHex     string       `json:"salt_hex"`
	BDHex       string       `json:"bd_hex"`
	HeaderHex   string       `json:"header_hex"`
	ID          string       `json:"id"`
	EnvelopeHex string       `json:"envelope_hex"`
	StoredHex   string       `json:"stored_hex"`
}

type vectorHeader struct {
	V      uint64 `json:"v"`
	Act    string `json:"act"`
	Kind   string `json:"kind"`
	Thread string `json:"thread"`
	Actor  string `json:"actor"`
	TS     int64  `json:"ts"`
	Prev   string `json:"prev,omitempty"`
}

// vectorInput is the Go source of one vector.
type vectorInput struct {
	name                     string
	act, kind, thread, actor string
	ts                       int64
	prev                     string // name of the vector chained after, if any
	salt                     [SaltSize]byte
	body                     func(done map[string]*Record) any
}

// seqSalt returns the salt start, start+1, …, start+31.
func seqSalt(start byte) (s [SaltSize]byte) {
	for i := range s {
		s[i] = start + byte(i)
	}
	return s
}

func fillSalt(b byte) (s [SaltSize]byte) {
	for i := range s {
		s[i] = b
	}
	return s
}

func constBody(v any) func(map[string]*Record) any {
	return func(map[string]*Record) any { return v }
}

const (
	vecActor = "did:sync:agent:dev"
	vecTS    = 1700000000000 // 2023-11-14T22:13:20Z
)

func vectorInputs() []vectorInput {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	minCBOR := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64)) // -2^64
	return []vectorInput{
		{name: "first-record", act: ActKnow, kind: "note.text", thread: "main", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x00), body: constBody(map[string]any{"text": "hello"})},
		{name: "chained-record", act: ActKnow, kind: "note.text", thread: "main", actor: vecActor, ts: vecTS + 1,
			prev: "first-record", salt: seqSalt(0x20), body: constBody(map[string]any{"text": "world"})},
		{name: "chained-third", act: ActSay, kind: "note.text", thread: "main", actor: vecActor, ts: vecTS + 2,
			prev: "chained-record", salt: seqSalt(0x40), body: constBody(map[string]any{"text": "!"})},
		{name: "empty-body", act: ActKnow, kind: "note.empty", thread: "empty", actor: vecActor, ts: vecTS,
			salt: fillSalt(0x00), body: constBody(map[string]any{})},
		{name: "thread-cjk", act: ActKnow, kind: "note.text", thread: "研究/ベクトル検索-一", actor: vecActor, ts: vecTS,
			salt: fillSalt(0xff), body: constBody(map[string]any{"text": "中文 日本語 한국어"})},
		{name: "thread-emoji", act: ActKnow, kind: "note.text", thread: "🧠 agent 🚀 run 👩‍💻", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x60), body: constBody(map[string]any{"text": "🎉"})},
		{name: "thread-combining-marks", act: ActKnow, kind: "note.text", thread: "cafe\u0301 / e\u0301te\u0301 (NFD, not normalized)", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x80), body: constBody(map[string]any{"nfc": "caf\u00e9", "nfd": "cafe\u0301"})},
		{name: "thread-256-bytes", act: ActKnow, kind: "note.text", thread: strings.Repeat("abcdefgh", 32), actor: vecActor, ts: vecTS,
			salt: seqSalt(0xa0), body: constBody(map[string]any{"text": "long thread"})},
		{name: "nested-body", act: ActDo, kind: "agent.plan", thread: "main", actor: vecActor, ts: vecTS,
			salt: seqSalt(0xc0), body: constBody(map[string]any{
				"plan": map[string]any{
					"steps": []any{
						map[string]any{"id": 1, "tools": []any{"grep", "go test"}},
						map[string]any{"id": 2, "tools": []any{}},
					},
					"meta": map[string]any{"depth": map[string]any{"level": map[string]any{"deep": true}}},
				},
			})},
		{name: "uint-boundaries", act: ActKnow, kind: "test.ints", thread: "ints", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x01), body: constBody(map[string]any{
				"u0": 0, "u23": 23, "u24": 24, "u255": 255, "u256": 256, "u65535": 65535, "u65536": 65536,
				"u4294967295": uint64(4294967295), "u4294967296": uint64(4294967296),
				"max_int64": int64(math.MaxInt64), "max_uint64": uint64(math.MaxUint64),
			})},
		{name: "negint-boundaries", act: ActKnow, kind: "test.ints", thread: "ints", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x02), body: constBody(map[string]any{
				"n1": -1, "n24": -24, "n25": -25, "n256": -256, "n257": -257, "n65536": -65536, "n65537": -65537,
				"n4294967296": int64(-4294967296), "n4294967297": int64(-4294967297),
				"min_int64": int64(math.MinInt64), "min_cbor": minCBOR,
			})},
		{name: "floats", act: ActKnow, kind: "test.floats", thread: "floats", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x03), body: constBody(map[string]any{
				"half": 0.5, "one": 1.0, "neg": -2.5, "neg_zero": math.Copysign(0, -1), "f16_max": 65504.0,
				"f32": 100000.0, "f32_max": float64(math.MaxFloat32),
				"tenth": 0.1, "big": 1e300, "tiny": 5e-324,
			})},
		{name: "empty-containers", act: ActKnow, kind: "test.empty", thread: "empty", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x04), body: constBody(map[string]any{"arr": []any{}, "map": map[string]any{}, "str": "", "bytes": []byte{}})},
		{name: "byte-strings", act: ActKnow, kind: "test.bytes", thread: "bytes", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x05), body: constBody(map[string]any{"blob": []byte{0x00, 0xff, 0x10}, "b23": seq(23), "b24": seq(24), "b32": seq(32)})},
		{name: "string-lengths", act: ActKnow, kind: "test.strings", thread: "strings", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x06), body: constBody(map[string]any{
				"s23": strings.Repeat("a", 23), "s24": strings.Repeat("b", 24),
				"s255": strings.Repeat("c", 255), "s256": strings.Repeat("d", 256),
			})},
		{name: "key-order", act: ActKnow, kind: "test.keys", thread: "keys", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x07), body: constBody(map[string]any{"b": 1, "aa": 2, "c": 3, "é": 4, "z": 5, "": 6, "ab": 7})},
		{name: "mixed-keys", act: ActKnow, kind: "test.keys", thread: "keys", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x08), body: constBody(map[any]any{
				uint64(1): "one", uint64(24): "twenty-four", int64(-1): "minus one",
				"a": "text", cbor.ByteString("k"): "bytes", false: "false",
			})},
		{name: "bools-and-null", act: ActKnow, kind: "test.simple", thread: "simple", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x09), body: constBody(map[string]any{"t": true, "f": false, "n": nil, "list": []any{true, nil, false}})},
		{name: "unicode-body", act: ActSay, kind: "chat.message", thread: "chat", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x0a), body: constBody(map[string]any{"text": "naïve café — 日本語 🎉", "ключ": "значение", "escape": "tab\there \"quoted\" \\ \u2028"})},
		{name: "checkpoint", act: ActLearn, kind: KindCheckpoint, thread: "research/vector-db", actor: vecActor, ts: vecTS,
			salt: seqSalt(0x0b), body: constBody(&Checkpoint{
				Summary:   "Compared pgvector, Qdrant and LanceDB for 1M embeddings.",
				Learnings: []string{"pgvector with HNSW is fast enough", "LanceDB needs no server"},
				NextSteps: []string{"benchmark recall at k=10"},
				SessionID: "sess-42",
				Name:      "before-refactor",
				Extra:     map[string]any{"model": "claude", "tokens": 1234},
			})},
		{name: "checkpoint-minimal", act: ActLearn, kind: KindCheckpoint, thread: "research/vector-db", actor: vecActor, ts: vecTS + 60000,
			prev: "checkpoint", salt: seqSalt(0x0c), body: constBody(&Checkpoint{Summary: "s", Learnings: []string{"l"}})},
		{name: "erasure", act: ActForget, kind: KindErasure, thread: "main", actor: "did:sync:user:alice", ts: vecTS + 3,
			prev: "chained-third", salt: seqSalt(0x0d), body: func(done map[string]*Record) any {
				a, b := done["first-record"], done["chained-record"]
				return &Erasure{
					Targets: []ErasureTarget{{ID: a.ID(), Header: a.Header}, {ID: b.ID(), Header: b.Header}},
					Reason:  "user request",
				}
			}},
		{name: "ts-min", act: ActDo, kind: "test.ts", thread: "ts", actor: vecActor, ts: 1,
			salt: seqSalt(0x0e), body: constBody(map[string]any{})},
		{name: "ts-small", act: ActDo, kind: "test.ts", thread: "ts", actor: vecActor, ts: 1000,
			salt: seqSalt(0x0f), body: constBody(map[string]any{})},
		{name: "ts-max", act: ActDo, kind: "test.ts", thread: "ts", actor: vecActor, ts: 253402300799999,
			salt: seqSalt(0x10), body: constBody(map[string]any{})},
		{name: "custom-act-and-did", act: "REVIEW_2", kind: "tool.call.result_v2", thread: "tools",
			actor: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", ts: vecTS,
			salt: seqSalt(0x11), body: constBody(map[string]any{"ok": true})},
		{name: "actor-percent-encoded", act: ActKnow, kind: "note.text", thread: "main",
			actor: "did:web:example.com%3A8443:agents:dev", ts: vecTS,
			salt: seqSalt(0x12), body: constBody(map[string]any{"text": "hi"})},
	}
}

// generateVectors builds every vector from vectorInputs.
func generateVectors(t *testing.T) ([]vector, map[string]*Record) {
	t.Helper()
	done := make(map[string]*Record)
	var out []vector
	for _, in := range vectorInputs() {
		r, err := newRecord(in.act, in.kind, in.thread, in.actor, in.ts, in.body(done), in.salt)
		if err != nil {
			t.Fatalf("vector %s: %v", in.name, err)
		}
		if in.prev != "" {
			p, ok := done[in.prev]
			if !ok {
				t.Fatalf("vector %s: prev %s is not an earlier vector", in.name, in.prev)
			}
			r = r.WithPrev(p.ID())
		}
		if _, dup := done[in.name]; dup {
			t.Fatalf("vector %s: name used twice", in.name)
		}
		done[in.name] = r
		env, err := r.Marshal()
		if err != nil {
			t.Fatalf("vector %s: Marshal: %v", in.name, err)
		}
		stored, err := r.MarshalOutside()
		if err != nil {
			t.Fatalf("vector %s: MarshalOutside: %v", in.name, err)
		}
		v := vector{
			Name: in.name,
			Header: vectorHeader{V: r.Header.V, Act: r.Header.Act, Kind: r.Header.Kind, Thread: r.Header.Thread,
				Actor: r.Header.Actor, TS: r.Header.TS},
			BodyHex:     hex.EncodeToString(r.Body),
			BodyDiag:    diag(t, r.Body),
			SaltHex:     hex.EncodeToString(r.Salt[:]),
			BDHex:       hex.EncodeToString(r.Header.BD[:]),
			HeaderHex:   hex.EncodeToString(r.Header.Encode()),
			ID:          r.ID().String(),
			EnvelopeHex: hex.EncodeToString(env),
			StoredHex:   hex.EncodeToString(stored),
		}
		if !r.Header.Prev.IsZero() {
			v.Header.Prev = r.Header.Prev.String()
		}
		out = append(out, v)
	}
	return out, done
}

func TestVectors(t *testing.T) {
	generated, records := generateVectors(t)
	if *rewrite {
		f := vectorFile{
			Comment: "spl record test vectors; generated by `go test ./records -run TestVectors -rewrite`. " +
				"For each vector: header_hex is the canonical CBOR of header (with bd); bd = BLAKE3 keyed with salt over body_hex; " +
				"id = CIDv1 text of BLAKE3-256(header_hex); envelope_hex = {\"b\": body, \"h\": header, \"s\": salt}; " +
				"stored_hex = {\"h\": header, \"o\": length of body_hex in bytes, \"s\": salt}, the envelope as stored when the body is kept outside it " +
				"(the id and bd do not change with where the body lives).",
			Vectors: generated,
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f); err != nil {
			t.Fatalf("encode vectors: %v", err)
		}
		if err := os.WriteFile(vectorsFile, buf.Bytes(), 0o644); err != nil {
			t.Fatalf("write vectors: %v", err)
		}
		writeFuzzSeeds(t, records)
	}

	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("read vectors (regenerate with -rewrite): %v", err)
	}
	var f vectorFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("parse %s: %v", vectorsFile, err)
	}
	if got, min := len(f.Vectors), 20; got < min {
		t.Fatalf("len(vectors)=%d, want at least %d", got, min)
	}
	if !reflect.DeepEqual(f.Vectors, generated) {
		t.Fatalf("%s differs from the vectors the code generates; review and run with -rewrite", vectorsFile)
	}
	ids := make(map[string]bool)
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			checkVector(t, v, ids)
		})
		ids[v.ID] = true
	}
}

// checkVector checks every step of a vector from the file's data alone, as
// an SDK in another language would.
func checkVector(t *testing.T, v vector, earlier map[string]bool) {
	body := mustHex(t, v.BodyHex)
	salt := mustHex(t, v.SaltHex)
	bd := mustHex(t, v.BDHex)
	if got, want := len(salt), SaltSize; got != want {
		t.Fatalf("len(salt)=%d, want %d", got, want)
	}

	// body_hex is a canonical CBOR map that fits the kind's schema.
	if _, err := decodeBodyMap(body); err != nil {
		t.Fatalf("body_hex is not a canonical map: %v", err)
	}
	if err := ValidateBody(v.Header.Kind, body); err != nil {
		t.Fatalf("ValidateBody: %v", err)
	}
	if got, want := diag(t, body), v.BodyDiag; got != want {
		t.Fatalf("body_diag=%s, want %s", want, got)
	}

	// bd = keyed BLAKE3(salt, body).
	h, err := blake3.NewKeyed(salt)
	if err != nil {
		t.Fatalf("NewKeyed: %v", err)
	}
	h.Write(body)
	if got, want := hex.EncodeToString(h.Sum(nil)), v.BDHex; got != want {
		t.Fatalf("bd=%s, want %s", got, want)
	}

	// header → header_hex.
	hdr := Header{V: v.Header.V, Act: v.Header.Act, Kind: v.Header.Kind, Thread: v.Header.Thread,
		Actor: v.Header.Actor, TS: v.Header.TS}
	copy(hdr.BD[:], bd)
	if v.Header.Prev != "" {
		if hdr.Prev, err = ParseID(v.Header.Prev); err != nil {
			t.Fatalf("ParseID(prev): %v", err)
		}
		if !earlier[v.Header.Prev] {
			t.Fatalf("prev %s is not the id of an earlier vector", v.Header.Prev)
		}
	}
	if got, want := hex.EncodeToString(hdr.Encode()), v.HeaderHex; got != want {
		t.Fatalf("header_hex=%s, want %s", got, want)
	}
	// The same bytes from the CBOR library, as a cross-check of Encode.
	m := map[string]any{"v": hdr.V, "bd": hdr.BD[:], "ts": hdr.TS, "act": hdr.Act,
		"kind": hdr.Kind, "actor": hdr.Actor, "thread": hdr.Thread}
	if !hdr.Prev.IsZero() {
		m["prev"] = hdr.Prev.Bytes()
	}
	lib, err := encMode.Marshal(m)
	if err != nil {
		t.Fatalf("library encode: %v", err)
	}
	if got, want := hex.EncodeToString(lib), v.HeaderHex; got != want {
		t.Fatalf("library header=%s, want %s", got, want)
	}
	decoded, err := DecodeHeader(mustHex(t, v.HeaderHex))
	if err != nil {
		t.Fatalf("DecodeHeader: %v", err)
	}
	if got, want := decoded, hdr; got != want {
		t.Fatalf("DecodeHeader=%+v, want %+v", got, want)
	}

	// id = CIDv1(BLAKE3-256(header_hex)).
	sum := blake3.Sum256(mustHex(t, v.HeaderHex))
	cid := append([]byte{0x01, 0x51, 0x1e, 0x20}, sum[:]...)
	if got, want := "b"+strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(cid), "=")), v.ID; got != want {
		t.Fatalf("id=%s, want %s", got, want)
	}
	if got, want := hdr.ID().String(), v.ID; got != want {
		t.Fatalf("Header.ID()=%s, want %s", got, want)
	}

	// The envelope decodes, verifies, validates and re-encodes.
	env := mustHex(t, v.EnvelopeHex)
	r, err := Unmarshal(env)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	id, err := ParseID(v.ID)
	if err != nil {
		t.Fatalf("ParseID: %v", err)
	}
	if err := r.Verify(id); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	again, err := r.Marshal()
	if err != nil || !bytes.Equal(again, env) {
		t.Fatalf("Marshal=%x, %v; want envelope_hex", again, err)
	}

	// The same record with its body kept outside: same header, same id.
	stored := mustHex(t, v.StoredHex)
	o, st, err := UnmarshalStored(stored)
	if err != nil {
		t.Fatalf("UnmarshalStored: %v", err)
	}
	if err := o.AttachBody(mustHex(t, v.BodyHex), st.Size); err != nil {
		t.Fatalf("AttachBody: %v", err)
	}
	if err := o.Verify(id); err != nil {
		t.Fatalf("Verify (outside): %v", err)
	}
	if again, err := o.MarshalOutside(); err != nil || !bytes.Equal(again, stored) {
		t.Fatalf("MarshalOutside=%x, %v; want stored_hex", again, err)
	}
}

// TestVectorsByHand checks header bytes assembled by hand, so that the
// vectors do not merely mirror Header.Encode.
func TestVectorsByHand(t *testing.T) {
	vs, _ := generateVectors(t)
	byName := make(map[string]vector)
	for _, v := range vs {
		byName[v.Name] = v
	}
	text := func(s string) string { return hex.EncodeToString([]byte(s)) }

	first := byName["first-record"]
	want := "a7" + // map(7): no "prev"
		"61" + text("v") + "01" + // "v": 1
		"62" + text("bd") + "5820" + first.BDHex + // "bd": bstr(32)
		"62" + text("ts") + "1b" + "0000018bcfe56800" + // "ts": 1700000000000 (> 2^32: 8 bytes)
		"63" + text("act") + "64" + text("KNOW") + // "act": "KNOW"
		"64" + text("kind") + "69" + text("note.text") + // "kind": text(9)
		"65" + text("actor") + "72" + text("did:sync:agent:dev") + // "actor": text(18)
		"66" + text("thread") + "64" + text("main") // "thread": text(4)
	if got := first.HeaderHex; got != want {
		t.Fatalf("first-record header_hex=\n%s, want by hand\n%s", got, want)
	}
	if got, want := first.BodyHex, "a1"+"64"+text("text")+"65"+text("hello"); got != want {
		t.Fatalf("first-record body_hex=%s, want %s", got, want)
	}

	chained := byName["chained-record"]
	firstSum := blake3.Sum256(mustHex(t, first.HeaderHex))
	want = "a8" + // map(8): with "prev"
		"61" + text("v") + "01" +
		"62" + text("bd") + "5820" + chained.BDHex +
		"62" + text("ts") + "1b" + "0000018bcfe56801" +
		"63" + text("act") + "64" + text("KNOW") +
		"64" + text("kind") + "69" + text("note.text") +
		"64" + text("prev") + "5824" + "01511e20" + hex.EncodeToString(firstSum[:]) + // "prev": bstr(36) binary CID
		"65" + text("actor") + "72" + text("did:sync:agent:dev") +
		"66" + text("thread") + "64" + text("main")
	if got := chained.HeaderHex; got != want {
		t.Fatalf("chained-record header_hex=\n%s, want by hand\n%s", got, want)
	}

	tsMin := byName["ts-min"]
	if !strings.Contains(tsMin.HeaderHex, "62"+text("ts")+"01"+"63") {
		t.Fatalf("ts-min header_hex=%s, want ts encoded as the single byte 01", tsMin.HeaderHex)
	}
	tsSmall := byName["ts-small"]
	if !strings.Contains(tsSmall.HeaderHex, "62"+text("ts")+"1903e8"+"63") {
		t.Fatalf("ts-small header_hex=%s, want ts encoded as 19 03e8", tsSmall.HeaderHex)
	}

	// Integers and floats at encoding boundaries, by hand.
	ints := byName["uint-boundaries"].BodyHex
	for _, enc := range []string{
		"63" + text("u23") + "17",
		"63" + text("u24") + "1818",
		"64" + text("u255") + "18ff",
		"64" + text("u256") + "190100",
		"66" + text("u65535") + "19ffff",
		"66" + text("u65536") + "1a00010000",
		"6b" + text("u4294967295") + "1affffffff",
		"6b" + text("u4294967296") + "1b0000000100000000",
		"69" + text("max_int64") + "1b7fffffffffffffff",
		"6a" + text("max_uint64") + "1bffffffffffffffff",
	} {
		if !strings.Contains(ints, enc) {
			t.Fatalf("uint-boundaries body_hex=%s lacks %s", ints, enc)
		}
	}
	negs := byName["negint-boundaries"].BodyHex
	for _, enc := range []string{
		"62" + text("n1") + "20",
		"63" + text("n24") + "37",
		"63" + text("n25") + "3818",
		"64" + text("n256") + "38ff",
		"64" + text("n257") + "390100",
		"69" + text("min_int64") + "3b7fffffffffffffff",
		"68" + text("min_cbor") + "3bffffffffffffffff",
	} {
		if !strings.Contains(negs, enc) {
			t.Fatalf("negint-boundaries body_hex=%s lacks %s", negs, enc)
		}
	}
	floats := byName["floats"].BodyHex
	for _, enc := range []string{
		"64" + text("half") + "f93800", // float16
		"63" + text("one") + "f93c00",
		"68" + text("neg_zero") + "f98000",
		"67" + text("f16_max") + "f97bff",
		"63" + text("f32") + "fa47c35000", // float32
		"67" + text("f32_max") + "fa7f7fffff",
		"65" + text("tenth") + "fb3fb999999999999a", // float64
		"64" + text("tiny") + "fb0000000000000001",
	} {
		if !strings.Contains(floats, enc) {
			t.Fatalf("floats body_hex=%s lacks %s", floats, enc)
		}
	}
	// Core deterministic key order: shorter keys first, then bytewise.
	if got, want := byName["key-order"].BodyHex, "a7"+
		"60"+"06"+ // ""
		"61"+text("b")+"01"+"61"+text("c")+"03"+"61"+text("z")+"05"+
		"62"+text("aa")+"02"+"62"+text("ab")+"07"+"62"+"c3a9"+"04"; got != want {
		t.Fatalf("key-order body_hex=%s, want %s", got, want)
	}
}

// TestBLAKE3 checks the hash against the official BLAKE3 test vectors
// (test_vectors.json of the reference implementation: input bytes i%251,
// key "whats the Elvish word for friend"; first 32 bytes of each output).
func TestBLAKE3(t *testing.T) {
	if got, want := hex.EncodeToString(func() []byte { s := blake3.Sum256(nil); return s[:] }()),
		"af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"; got != want {
		t.Fatalf("BLAKE3(\"\")=%s, want %s", got, want)
	}
	var key [SaltSize]byte
	copy(key[:], "whats the Elvish word for friend")
	for _, tt := range []struct {
		input []byte
		want  string
	}{
		{nil, "92b2b75604ed3c761f9d6f62392c8a9227ad0ea3f09573e783f1498a4ed60d26"},
		{[]byte{0}, "6d7878dfff2f485635d39013278ae14f1454b8c0a3a2d34bc1ab38228a80c95b"},
	} {
		d := bodyDigest(key, tt.input)
		if got := hex.EncodeToString(d[:]); got != tt.want {
			t.Fatalf("keyed BLAKE3(%x)=%s, want %s", tt.input, got, tt.want)
		}
	}
}

// writeFuzzSeeds writes the FuzzUnmarshal seed corpus: valid envelopes and
// near-misses built from the vectors.
func writeFuzzSeeds(t *testing.T, records map[string]*Record) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzUnmarshal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	env := func(name string) []byte {
		b, err := records[name].Marshal()
		if err != nil {
			t.Fatalf("Marshal %s: %v", name, err)
		}
		return b
	}
	seeds := map[string][]byte{
		"envelope-first-record": env("first-record"),
		"envelope-chained":      env("chained-record"),
		"envelope-checkpoint":   env("checkpoint"),
		"envelope-erasure":      env("erasure"),
		"envelope-floats":       env("floats"),
		"envelope-mixed-keys":   env("mixed-keys"),
		"header-chained":        records["chained-record"].Header.Encode(),
		"body-checkpoint":       records["checkpoint"].Body,
		"body-erasure":          records["erasure"].Body,
	}
	truncated := env("first-record")
	seeds["near-truncated"] = truncated[:len(truncated)-1]
	indef := env("first-record")
	indef[0] = 0xbf
	seeds["near-indefinite-envelope"] = append(indef, 0xff)
	nonMinimal := slices.Clone(records["first-record"].Body)
	nonMinimal = append([]byte{0xb8, 0x01}, nonMinimal[1:]...) // map(1) with a 1-byte argument
	seeds["near-non-minimal-body-length"] = nonMinimal
	for name, b := range seeds {
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatalf("write seed: %v", err)
		}
	}
}

// diag returns the CBOR diagnostic notation (RFC 8949 section 8) of a
// canonical body, with map keys in encoded order and floats marked with
// their encoding width (_1 float16, _2 float32, _3 float64).
func diag(t *testing.T, body []byte) string {
	t.Helper()
	v, err := decodeCanonical(body)
	if err != nil {
		t.Fatalf("diag: %v", err)
	}
	var b strings.Builder
	writeDiag(t, &b, v)
	return b.String()
}

func writeDiag(t *testing.T, b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[any]any:
		type pair struct {
			key []byte
			k   any
		}
		pairs := make([]pair, 0, len(v))
		for k := range v {
			enc, err := encMode.Marshal(k)
			if err != nil {
				t.Fatalf("diag key: %v", err)
			}
			pairs = append(pairs, pair{enc, k})
		}
		slices.SortFunc(pairs, func(x, y pair) int { return bytes.Compare(x.key, y.key) })
		b.WriteString("{")
		for i, p := range pairs {
			if i > 0 {
				b.WriteString(", ")
			}
			writeDiag(t, b, p.k)
			b.WriteString(": ")
			writeDiag(t, b, v[p.k])
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeDiag(t, b, e)
		}
		b.WriteString("]")
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatalf("diag string: %v", err)
		}
		b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	case []byte:
		b.WriteString("h'" + hex.EncodeToString(v) + "'")
	case cbor.ByteString:
		b.WriteString("h'" + hex.EncodeToString([]byte(v)) + "'")
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		enc, err := encMode.Marshal(v)
		if err != nil {
			t.Fatalf("diag float: %v", err)
		}
		s += map[int]string{3: "_1", 5: "_2", 9: "_3"}[len(enc)]
		b.WriteString(s)
	case big.Int:
		b.WriteString(v.String())
	case nil:
		b.WriteString("null")
	default: // uint64, int64, bool
		fmt.Fprint(b, v)
	}
}
