package serve

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// doorClient is a Go SDK client of s over NATS with the write token: a
// door client.
func doorClient(t *testing.T, s *Server) *sdk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := sdk.Connect(ctx, s.NATSURL(), sdk.WithActor("did:sync:agent:door"), sdk.WithTimeout(5*time.Second),
		sdk.WithNATSOptions(nats.Token(dirSecret(t, s, natsio.TokenFile))))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// What a Go program does over NATS with the write token works through the
// door, each step by the service layer's rules: appends (conditional ones
// refused with ErrMoved when the thread moved), a follow that sees a
// record appended after it began, erasures, and a run whose snapshot and
// effect output are too large for a record, stored beside the log, read
// back on resume and erased with the records that name them.
func TestDoorFaces(t *testing.T) {
	s := start(t, Config{})
	c := doorClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r1, err := c.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th_door", Body: map[string]any{"n": 1}})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	rec, err := records.New(records.ActSay, "note.text", "th_door", "did:sync:agent:door", time.Now(), map[string]any{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	_, wlog := natsLog(t, s, dirSecret(t, s, natsio.TokenFile))
	if _, err := wlog.AppendAfter(ctx, rec, r1.Clock+5); !errors.Is(err, log.ErrMoved) {
		t.Fatalf("append after a clock the thread is not at: %v, want ErrMoved", err)
	}
	got := make(chan sdk.Record, 1)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	go func() {
		for r, err := range c.Follow(fctx, "th_door", r1.Clock+1) {
			if err == nil {
				got <- r
			}
			return
		}
	}()
	r2, err := wlog.AppendAfter(ctx, rec, r1.Clock)
	if err != nil {
		t.Fatalf("append after the thread's clock: %v", err)
	}
	select {
	case r := <-got:
		if r.ID != r2.ID {
			t.Fatalf("follow yielded %s, want %s", r.ID, r2.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow through the door saw nothing in 10s")
	}
	res, err := c.Erase(ctx, "th_door", "", []records.ID{r1.ID}, "test")
	if err != nil || len(res.Erased) != 1 || len(res.Erasures) != 1 {
		t.Fatalf("erase: %+v, %v", res, err)
	}
	if rep, err := c.Verify(ctx, "th_door"); err != nil || !rep.OK() || len(rep.Erased) != 1 {
		t.Fatalf("verify after the erasure: %+v, %v", rep, err)
	}

	run, err := c.OpenRun(ctx, "th_door", "r1")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3*sdk.MaxInlinePayload)
	if err := run.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": 1, "text": big}); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(map[string]string{"text": big})
	calls := 0
	if _, err := run.Effect(ctx, "c1", "read", 1, func(context.Context) (json.RawMessage, error) { calls++; return out, nil }); err != nil {
		t.Fatalf("large effect through the door: %v", err)
	}
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	run, err = c.ResumeRun(ctx, "th_door", "r1")
	if err != nil {
		t.Fatal(err)
	}
	snap := run.Resume().Snapshot
	if snap == nil || snap.Blob == nil {
		t.Fatalf("snapshot %+v: want one beside the log", snap)
	}
	var p struct {
		Text string `cbor:"text"`
	}
	if err := snap.Payload.Decode(&p); err != nil || p.Text != big {
		t.Fatalf("snapshot read back through the door: %d bytes, %v", len(p.Text), err)
	}
	if res, err := run.Effect(ctx, "c1", "read", 1, func(context.Context) (json.RawMessage, error) { calls++; return out, nil }); err != nil || calls != 1 || string(res.Output) != string(out) {
		t.Fatalf("replayed effect: calls %d, %d bytes, %v", calls, len(res.Output), err)
	}
	run.Close()
	if rep, err := c.VerifyRun(ctx, "th_door", "r1"); err != nil || !rep.OK() || rep.Blobs != 2 {
		t.Fatalf("verify run: %+v, %v", rep, err)
	}
	if _, err := c.Erase(ctx, sdk.RunThread("th_door", "r1"), "", []records.ID{snap.ID}, "test"); err != nil {
		t.Fatalf("erase the snapshot: %v", err)
	}
	if _, err := s.Client().GetBlob(ctx, sdk.BlobBucket, snap.Blob.Digest[len("blake3k:"):]); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("the erased snapshot's blob: %v, want ErrNotFound", err)
	}
}

// The door refuses, naming the field, what a hostile client sends in
// place of what the Go SDK would: bytes that are no record, a chained
// record, a request with a duplicate key, an erasure whose targets are not
// the thread's, a blob put over another blob, an operation it has not.
func TestDoorRefuses(t *testing.T) {
	s := start(t, Config{})
	c := doorClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), nats.Token(dirSecret(t, s, natsio.TokenFile)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	call := func(op string, req any, out any) {
		t.Helper()
		var data []byte
		if b, ok := req.([]byte); ok {
			data = b
		} else if data, err = cbor.Marshal(req); err != nil {
			t.Fatal(err)
		}
		msg, err := nc.RequestWithContext(ctx, log.DoorSubject(log.DoorWrite, op), data)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if err := cbor.Unmarshal(msg.Data, out); err != nil {
			t.Fatalf("%s: answer: %v", op, err)
		}
	}
	refused := func(what string, e *log.DoorError, field string) {
		t.Helper()
		if e == nil || e.Field != field {
			t.Errorf("%s: %+v, want refused naming field %q", what, e, field)
		}
	}
	var rep log.DoorAppendReply
	call(log.DoorAppend, log.DoorAppendRequest{Items: []log.DoorItem{{Record: []byte("not cbor")}}}, &rep)
	if len(rep.Results) != 1 {
		t.Fatalf("append of garbage: %+v", rep)
	}
	refused("bytes that are no record", rep.Results[0].Err, "rec")

	r1, err := c.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th_door", Body: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := records.New(records.ActSay, "note.text", "th_door", "did:sync:agent:door", time.Now(), map[string]any{"n": 2})
	chained, _ := rec.WithPrev(r1.ID).Marshal()
	rep = log.DoorAppendReply{}
	call(log.DoorAppend, log.DoorAppendRequest{Items: []log.DoorItem{{Record: chained}}}, &rep)
	refused("a chained record", rep.Results[0].Err, "prev")

	// {"items": [], "items": []}: a duplicate key.
	rep = log.DoorAppendReply{}
	call(log.DoorAppend, []byte{0xa2, 0x65, 'i', 't', 'e', 'm', 's', 0x80, 0x65, 'i', 't', 'e', 'm', 's', 0x80}, &rep)
	refused("a request with a duplicate key", rep.Err, "request")

	// An erasure naming a record of the thread at a clock it is not at:
	// the audit trail would lie.
	h := r1Header(t, c, ctx, r1.ID)
	er, err := records.New(records.ActForget, records.KindErasure, "th_door", "did:sync:agent:door", time.Now(),
		&records.Erasure{Targets: []records.ErasureTarget{{ID: r1.ID, Header: h, Clock: r1.Clock + 7}}, Reason: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := er.Marshal()
	var erep log.DoorEraseReply
	call(log.DoorErase, log.DoorEraseRequest{Item: log.DoorItem{Record: data}}, &erep)
	if erep.Err == nil || erep.Err.Code != "moved" {
		t.Errorf("a forged erasure: %+v, want refused as moved", erep.Err)
	}
	if _, err := c.Record(ctx, r1.ID, "th_door"); err != nil {
		t.Errorf("the record a forged erasure named: %v, want it still there", err)
	}

	name := strings.Repeat("ab", 32)
	var brep log.DoorBlobReply
	call(log.DoorBlobPut, log.DoorBlobRequest{Bucket: sdk.BlobBucket, Name: name, Size: 3, Data: []byte("one")}, &brep)
	if brep.Err != nil {
		t.Fatalf("blob put: %+v", brep.Err)
	}
	brep = log.DoorBlobReply{}
	call(log.DoorBlobPut, log.DoorBlobRequest{Bucket: sdk.BlobBucket, Name: name, Size: 3, Data: []byte("two")}, &brep)
	if brep.Err == nil || brep.Err.Code != "blob_exists" {
		t.Errorf("a blob put over another: %+v, want blob_exists", brep.Err)
	}
	brep = log.DoorBlobReply{}
	call(log.DoorBlobGet, log.DoorBlobRequest{Bucket: sdk.BlobBucket, Name: name}, &brep)
	if string(brep.Data) != "one" {
		t.Errorf("the blob after a put over it: %q, want %q", brep.Data, "one")
	}
	brep = log.DoorBlobReply{}
	call(log.DoorBlobPut, log.DoorBlobRequest{Bucket: sdk.BlobBucket, Name: "../etc", Size: 1, Data: []byte("x")}, &brep)
	refused("a blob name that is no digest", brep.Err, "name")
	call("purge", struct{}{}, &brep)
	refused("an operation the door has not", brep.Err, "subject")
}

// r1Header is the stored header of the record id on th_door.
func r1Header(t *testing.T, c *sdk.Client, ctx context.Context, id records.ID) records.Header {
	t.Helper()
	r, err := c.Record(ctx, id, "th_door")
	if err != nil {
		t.Fatal(err)
	}
	return r.Record.Header
}

// The read models are spl serve's to keep: a door client with the write
// token may not rebuild them (ErrReadOnly, naming the admin token), one
// with the admin token may.
func TestDoorRebuildTakesTheAdminRight(t *testing.T) {
	s := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(token string) *sdk.Client {
		c, err := sdk.Connect(ctx, s.NATSURL(), sdk.WithActor("did:sync:agent:door"), sdk.WithTimeout(5*time.Second),
			sdk.WithNATSOptions(nats.Token(dirSecret(t, s, token))))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin, writer := connect(AdminTokenFile), connect(natsio.TokenFile)
	if _, err := writer.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th_models", Body: map[string]any{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RebuildProjection(ctx, "", nil); err != nil {
		t.Fatalf("rebuild with the admin token: %v", err)
	}
	if err := writer.RebuildProjection(ctx, "", nil); !errors.Is(err, projections.ErrReadOnly) || !strings.Contains(err.Error(), "admin token") {
		t.Fatalf("rebuild with the write token: %v, want ErrReadOnly naming the admin token", err)
	}
}

// A Go program over NATS appends records of 10 MB through the door: the
// body is staged on the server in parts, the record lands with the id the
// client computed, and it reads back whole. One the server's redaction
// changes comes back as stored, its body read from the log.
func TestDoorLargeRecord(t *testing.T) {
	s := start(t, Config{})
	c := doorClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := strings.Repeat("y", 10<<20)
	r, err := c.Emit(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.state", Thread: "th_door_big", Body: map[string]any{"messages": big}})
	if err != nil {
		t.Fatalf("emit 10 MB through the door: %v", err)
	}
	got, err := c.Record(ctx, r.ID, "th_door_big")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages string `cbor:"messages"`
	}
	if err := got.DecodeBody(&body); err != nil || body.Messages != big {
		t.Fatalf("read back %d bytes (%v), want %d", len(body.Messages), err, len(big))
	}

	if _, err := s.Client().SetRedaction(ctx, "did:sync:agent:admin", sdk.RedactionPolicy{Thread: "th_door_big", Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	r2, err := c.Emit(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.state", Thread: "th_door_big", Body: map[string]any{"messages": big, "api_key": "sk-secret"}})
	if err != nil {
		t.Fatalf("emit a redacted 10 MB record: %v", err)
	}
	got, err = s.Client().Record(ctx, r2.ID, "th_door_big")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got.Body), "sk-secret") || !strings.Contains(string(got.Body), big[:64]) {
		t.Fatalf("stored record: the key is kept or the messages are gone")
	}
	if rep, err := c.Verify(ctx, "th_door_big"); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}
