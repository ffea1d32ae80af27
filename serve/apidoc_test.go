package serve

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// apiDoc is docs/http-api.yaml, decoded.
type apiDoc struct {
	Paths      map[string]map[string]apiOp `yaml:"paths"`
	Components struct {
		Schemas map[string]*apiSchema `yaml:"schemas"`
	} `yaml:"components"`
}

type apiOp struct {
	Responses map[string]struct {
		Content map[string]struct {
			Schema *apiSchema `yaml:"schema"`
		} `yaml:"content"`
	} `yaml:"responses"`
}

type apiSchema struct {
	Ref        string                `yaml:"$ref"`
	Type       string                `yaml:"type"`
	AllOf      []*apiSchema          `yaml:"allOf"`
	Properties map[string]*apiSchema `yaml:"properties"`
	Required   []string              `yaml:"required"`
	Items      *apiSchema            `yaml:"items"`
	Nullable   bool                  `yaml:"nullable"`
}

func readAPIDoc(t *testing.T) *apiDoc {
	t.Helper()
	data, err := os.ReadFile("../docs/http-api.yaml")
	if err != nil {
		t.Fatalf("read the OpenAPI file: %v", err)
	}
	var d apiDoc
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatalf("decode the OpenAPI file: %v", err)
	}
	return &d
}

// resolve follows $ref and merges allOf into one schema of properties.
func (d *apiDoc) resolve(t *testing.T, s *apiSchema) *apiSchema {
	t.Helper()
	if s == nil {
		return nil
	}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		r, ok := d.Components.Schemas[name]
		if !ok {
			t.Fatalf("schema %s: not in components", s.Ref)
		}
		return d.resolve(t, r)
	}
	if len(s.AllOf) == 0 {
		return s
	}
	out := &apiSchema{Type: "object", Properties: map[string]*apiSchema{}, Nullable: s.Nullable}
	for _, part := range s.AllOf {
		p := d.resolve(t, part)
		if len(p.Properties) == 0 && len(p.AllOf) == 0 && p.Type != "object" {
			return p // allOf of one non-object (a nullable ref)
		}
		for k, v := range p.Properties {
			out.Properties[k] = v
		}
		out.Required = append(out.Required, p.Required...)
	}
	return out
}

// checkShape compares the field names of a JSON answer with the schema:
// every field of the answer is documented, every required one present,
// down into nested objects and the items of arrays.
func (d *apiDoc) checkShape(t *testing.T, where string, s *apiSchema, v any) {
	t.Helper()
	s = d.resolve(t, s)
	if s == nil || v == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if len(s.Properties) == 0 {
			return // a free-form object (a body, state)
		}
		for k, fv := range v {
			ps, ok := s.Properties[k]
			if !ok {
				t.Errorf("%s: field %q is not documented (documented: %s)", where, k, strings.Join(slices.Sorted(maps.Keys(s.Properties)), " "))
				continue
			}
			d.checkShape(t, where+"."+k, ps, fv)
		}
		for _, k := range s.Required {
			if _, ok := v[k]; !ok {
				t.Errorf("%s: documented field %q is missing", where, k)
			}
		}
	case []any:
		for i, e := range v {
			d.checkShape(t, fmt.Sprintf("%s[%d]", where, i), s.Items, e)
		}
	}
}

// TestAPIShapes makes a request of every route that answers JSON and
// checks the field names of its answer against the schema docs/http-api.yaml
// gives for that route and code.
func TestAPIShapes(t *testing.T) {
	d := readAPIDoc(t)
	s := start(t, Config{})
	b := base(s)
	const thread = "th_shapes"
	var recs []wire.Record
	for i, body := range []string{
		`{"summary":"one","learnings":["a"],"next_steps":"b"}`,
		`{"summary":"two","learnings":["a"],"next_steps":["b"],"name":"second"}`,
	} {
		var r wire.Record
		if code := call(t, "POST", b+"/v1/records", emitBody(thread, "LEARN", records.KindCheckpoint, body), &r); code != http.StatusCreated {
			t.Fatalf("emit %d: code=%d", i, code)
		}
		recs = append(recs, r)
	}
	var step wire.Record
	call(t, "POST", b+"/v1/records", emitBody(thread, "DO", "agent.step", `{"step":1}`), &step)
	act := fmt.Sprintf("%q", actor)
	for _, tc := range []struct {
		method, route, path, body string
		code                      int
	}{
		{"POST", "/v1/records", "/v1/records", emitBody(thread, "DO", "agent.step", `{"step":2}`), 201},
		{"POST", "/v1/records/batch", "/v1/records/batch", `{"records":[` + emitBody(thread, "DO", "agent.step", `{"step":3}`) + `,` + emitBody(thread, "do", "agent.step", `{}`) + `]}`, 200},
		{"GET", "/v1/threads", "/v1/threads", "", 200},
		{"GET", "/v1/threads/{thread}/records", "/v1/threads/" + thread + "/records", "", 200},
		{"GET", "/v1/threads/{thread}/checkpoint", "/v1/threads/" + thread + "/checkpoint", "", 200},
		{"GET", "/v1/threads/{thread}/records", "/v1/threads/" + thread + "/records?envelope=true", "", 200},
		{"GET", "/v1/threads/{thread}/checkpoint", "/v1/threads/" + thread + "/checkpoint?envelope=true", "", 200},
		{"GET", "/v1/threads/{thread}/checkpoints", "/v1/threads/" + thread + "/checkpoints?envelope=true", "", 200},
		{"GET", "/v1/threads/{thread}/checkpoints", "/v1/threads/" + thread + "/checkpoints", "", 200},
		{"GET", "/v1/threads/{thread}/lineage", "/v1/threads/" + thread + "/lineage", "", 200},
		{"GET", "/v1/threads/{thread}/diff", "/v1/threads/" + thread + "/diff?a=" + recs[0].ID + "&b=" + recs[1].ID, "", 200},
		{"POST", "/v1/threads/{thread}/fork", "/v1/threads/" + thread + "/fork", `{"to":"th_shapes_fork","actor":` + act + `}`, 201},
		{"POST", "/v1/threads/{thread}/prune", "/v1/threads/" + thread + "/prune", `{"keep_last":1,"dry_run":true,"actor":` + act + `}`, 200},
		{"POST", "/v1/threads/{thread}/pause", "/v1/threads/" + thread + "/pause", `{"actor":` + act + `}`, 201},
		{"GET", "/v1/sessions", "/v1/sessions", "", 200},
		{"GET", "/v1/threads/{thread}/session", "/v1/threads/" + thread + "/session", "", 200},
		{"POST", "/v1/threads/{thread}/resume", "/v1/threads/" + thread + "/resume", `{"actor":` + act + `}`, 200},
		{"GET", "/v1/runs", "/v1/runs", "", 200},
		{"GET", "/v1/records/{id}", "/v1/records/" + recs[1].ID + "?thread=" + thread, "", 200},
		{"POST", "/v1/threads/{thread}/pins", "/v1/threads/" + thread + "/pins", `{"id":"` + recs[1].ID + `","actor":` + act + `}`, 201},
		{"PUT", "/v1/retention", "/v1/retention", `{"thread":"` + thread + `","keep_last":5,"actor":` + act + `}`, 201},
		{"GET", "/v1/retention", "/v1/retention", "", 200},
		{"DELETE", "/v1/retention", "/v1/retention", `{"thread":"` + thread + `","actor":` + act + `}`, 200},
		{"GET", "/v1/checkpoints/latest", "/v1/checkpoints/latest?limit=5", "", 200},
		{"POST", "/v1/threads/{thread}/erase", "/v1/threads/" + thread + "/erase", `{"ids":["` + step.ID + `"],"reason":"shape test","actor":` + act + `}`, 200},
		{"POST", "/v1/login", "/v1/login", `{"token":"` + s.cfg.HTTPReadToken + `"}`, 200},
		{"GET", "/v1/login", "/v1/login", "", 200},
		{"GET", "/healthz", "/healthz", "", 200},
	} {
		var v any
		code := call(t, tc.method, b+tc.path, tc.body, &v)
		if code != tc.code {
			t.Errorf("%s %s: code=%d, want %d (%v)", tc.method, tc.path, code, tc.code, v)
			continue
		}
		op, ok := d.Paths[tc.route][strings.ToLower(tc.method)]
		if !ok {
			t.Errorf("%s %s: not documented", tc.method, tc.route)
			continue
		}
		resp, ok := op.Responses[fmt.Sprint(code)]
		if !ok {
			t.Errorf("%s %s: answer %d not documented", tc.method, tc.route, code)
			continue
		}
		ct, ok := resp.Content["application/json"]
		if !ok || ct.Schema == nil {
			t.Errorf("%s %s: answer %d has no JSON schema", tc.method, tc.route, code)
			continue
		}
		d.checkShape(t, tc.method+" "+tc.route, ct.Schema, v)
	}
}

// TestRecordRaw checks that GET /v1/records/{id} with Accept:
// application/cbor answers the record's stored bytes, from which its id
// is computed again, and the id in Spl-Id.
func TestRecordRaw(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	var r wire.Record
	if code := call(t, "POST", b+"/v1/records", emitBody("th_raw", "DO", "agent.step", `{"step":1}`), &r); code != http.StatusCreated {
		t.Fatalf("emit: code=%d", code)
	}
	for _, q := range []string{"?thread=th_raw", ""} {
		req, _ := http.NewRequest("GET", b+"/v1/records/"+url.PathEscape(r.ID)+q, nil)
		req.Header.Set("Accept", "application/cbor")
		authorize(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET raw: %v", err)
		}
		data := make([]byte, 0, 512)
		buf := make([]byte, 512)
		for {
			n, err := resp.Body.Read(buf)
			data = append(data, buf[:n]...)
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if got, want := resp.StatusCode, http.StatusOK; got != want {
			t.Fatalf("code=%d, want %d: %s", got, want, data)
		}
		if got, want := resp.Header.Get("Spl-Id"), r.ID; got != want {
			t.Fatalf("Spl-Id=%q, want %q", got, want)
		}
		rec, err := records.Unmarshal(data)
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		want, err := records.ParseID(r.ID)
		if err != nil {
			t.Fatalf("ParseID: %v", err)
		}
		if err := rec.Verify(want); err != nil {
			t.Fatalf("the bytes do not verify as %s: %v", want, err)
		}
	}
	var e wire.Error
	if code := call(t, "GET", b+"/v1/records/nope", "", &e); code != http.StatusBadRequest || e.Field != "id" {
		t.Fatalf("bad id: code=%d field=%q, want 400 on id", code, e.Field)
	}
}
