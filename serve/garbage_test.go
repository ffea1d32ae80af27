package serve

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// TestGarbageOnACheckpointSubject: a message that is no record, published
// with the admin right onto a thread's checkpoint subject between valid
// saves, never blocks the thread over HTTP: the checkpoints are listed
// with its clock in "skipped", and a resume picks the newest valid one.
func TestGarbageOnACheckpointSubject(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	const thread = "th_garbage"
	save := func(summary string) string {
		var rec wire.Record
		if code := call(t, "POST", b+"/v1/records", emitBody(thread, "LEARN", records.KindCheckpoint, `{"summary":"`+summary+`","learnings":["l"]}`), &rec); code != 201 {
			t.Fatalf("save %s: %d", summary, code)
		}
		return rec.ID
	}
	save("one")
	aconn, _ := natsLog(t, s, dirSecret(t, s, AdminTokenFile))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ack, err := aconn.JS.PublishMsg(ctx, &nats.Msg{Subject: log.RecordSubject(thread, records.KindCheckpoint), Data: []byte{0xff, 0x00, 0x01}})
	if err != nil {
		t.Fatal(err)
	}
	two := save("two")
	var list checkpointsResponse
	if code := call(t, "GET", b+"/v1/threads/"+thread+"/checkpoints", "", &list); code != 200 || len(list.Checkpoints) != 2 || fmt.Sprint(list.Skipped) != fmt.Sprint([]uint64{ack.Sequence}) {
		t.Fatalf("checkpoints: %d, %d listed, skipped %v; want 200, 2, [%d]", code, len(list.Checkpoints), list.Skipped, ack.Sequence)
	}
	var rc wire.Resume
	if code := call(t, "POST", b+"/v1/threads/"+thread+"/resume", `{"actor":"`+actor+`"}`, &rc); code != 200 || rc.ResumedFrom != two || fmt.Sprint(rc.Skipped) != fmt.Sprint([]uint64{ack.Sequence}) {
		t.Fatalf("resume: %d, from %s skipping %v; want 200 from %s skipping [%d]", code, rc.ResumedFrom, rc.Skipped, two, ack.Sequence)
	}
}
