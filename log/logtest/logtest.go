// Package logtest damages a log behind spl's back, through the raw
// JetStream API, for tests that prove verification finds the damage: a
// message deleted with no erasure record, and a stored record republished
// with its body changed.
package logtest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// deleteAt deletes the message at clock without an erasure record.
func deleteAt(ctx context.Context, c *natsio.Conn, clock uint64) error {
	s, err := c.JS.Stream(ctx, log.DefaultStream)
	if err != nil {
		return fmt.Errorf("logtest: stream: %w", err)
	}
	if err := s.DeleteMsg(ctx, clock); err != nil {
		return fmt.Errorf("logtest: delete %d: %w", clock, err)
	}
	return nil
}

// forge republishes the record at clock with its body replaced by body,
// keeping its header, salt and claimed id, so that the copy fails its body
// digest. It returns the forged message's clock.
func forge(ctx context.Context, l *log.Log, c *natsio.Conn, clock uint64, body any) (uint64, error) {
	e, err := l.At(ctx, clock)
	if err != nil {
		return 0, fmt.Errorf("logtest: read %d: %w", clock, err)
	}
	h := e.Record.Header
	changed, err := records.New(h.Act, h.Kind, h.Thread, h.Actor, e.Record.Time(), body)
	if err != nil {
		return 0, fmt.Errorf("logtest: new body: %w", err)
	}
	forged := *e.Record
	forged.Body = changed.Body
	data, err := forged.Marshal()
	if err != nil {
		return 0, fmt.Errorf("logtest: marshal: %w", err)
	}
	msg := nats.NewMsg(log.RecordSubject(h.Thread, h.Kind))
	msg.Data = data
	msg.Header.Set(log.HeaderID, e.ID.String())
	ack, err := c.JS.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("logtest: publish: %w", err)
	}
	return ack.Sequence, nil
}

// Damage opens the embedded log in dir (becoming its server, or joining
// the one running), deletes the message at clock del (none when 0), forges
// the record at clock forgeAt with body, and closes the log. It returns the
// forged clock.
func Damage(ctx context.Context, dir string, del, forgeAt uint64, body any) (uint64, error) {
	c, err := natsio.Dial(ctx, natsio.Options{Dir: dir, Linger: time.Millisecond, Name: "logtest"})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	l, err := log.On(ctx, c, log.Options{})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if del != 0 {
		if err := deleteAt(ctx, c, del); err != nil {
			return 0, err
		}
	}
	return forge(ctx, l, c, forgeAt, body)
}

// Impersonate opens the embedded log in dir and appends a record of kind
// on thread as actor straight to the log, past the service layer and its
// rules (a server's --require-signed among them), as a writer holding the
// log's credentials could: signed with key, or unsigned when key is nil.
// The record is well formed and chained, so only its signature, or its
// lack of one, gives it away. It returns the record's clock.
func Impersonate(ctx context.Context, dir, thread, kind, actor string, key ed25519.PrivateKey) (uint64, error) {
	c, err := natsio.Dial(ctx, natsio.Options{Dir: dir, Linger: time.Millisecond, Name: "logtest"})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	l, err := log.On(ctx, c, log.Options{})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	rec, err := records.New(records.ActSay, kind, thread, actor, time.Now(), map[string]any{"text": "not me"})
	if err != nil {
		return 0, fmt.Errorf("logtest: new record: %w", err)
	}
	if key != nil {
		rec.Sign(key)
	}
	e, err := l.Append(ctx, rec)
	if err != nil {
		return 0, fmt.Errorf("logtest: append: %w", err)
	}
	return e.Clock, nil
}
