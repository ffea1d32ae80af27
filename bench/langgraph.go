package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spl-dev/spl/records"
)

// LangGraph's checkpoint schema and queries, as langgraph-checkpoint-postgres
// (libs/checkpoint-postgres/langgraph/checkpoint/postgres/base.py and
// __init__.py) creates and runs them, and the same adapted to SQLite.

// pgMigrations are LangGraph's MIGRATIONS, run in order as its setup()
// runs them (each in autocommit, recorded in checkpoint_migrations).
var pgMigrations = []string{
	`CREATE TABLE IF NOT EXISTS checkpoint_migrations (
    v INTEGER PRIMARY KEY
);`,
	`CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);`,
	`CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);`,
	`CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);`,
	`ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null;`,
	`SELECT 1;`,
	`CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id);`,
	`CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id);`,
	`CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id);`,
	`ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT '';`,
}

// pgSelect is LangGraph's SELECT_SQL: the checkpoint row with its channel
// values (from checkpoint_blobs, by the versions in the checkpoint) and
// its pending writes.
const pgSelect = `
select
    thread_id,
    checkpoint,
    checkpoint_ns,
    checkpoint_id,
    parent_checkpoint_id,
    metadata,
    (
        select array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
        from jsonb_each_text(checkpoint -> 'channel_versions')
        inner join checkpoint_blobs bl
            on bl.thread_id = checkpoints.thread_id
            and bl.checkpoint_ns = checkpoints.checkpoint_ns
            and bl.channel = jsonb_each_text.key
            and bl.version = jsonb_each_text.value
    ) as channel_values,
    (
        select
        array_agg(array[cw.task_id::text::bytea, cw.channel::bytea, cw.type::bytea, cw.blob] order by cw.task_id, cw.idx)
        from checkpoint_writes cw
        where cw.thread_id = checkpoints.thread_id
            and cw.checkpoint_ns = checkpoints.checkpoint_ns
            and cw.checkpoint_id = checkpoints.checkpoint_id
    ) as pending_writes
from checkpoints `

// The where clauses of get_tuple (latest) and list(limit=n).
const (
	pgGetLatest = pgSelect + `WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT 1`
	pgList      = pgSelect + `WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT $3`
)

// UPSERT_CHECKPOINT_BLOBS_SQL and UPSERT_CHECKPOINTS_SQL.
const (
	pgUpsertBlob = `
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`
	pgUpsertCheckpoint = `
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
    DO UPDATE SET
        checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata`
)

// LangGraph has no thread index: the most recently active threads are a
// grouping over the checkpoints table (no index serves it).
const recentSQL = `SELECT thread_id, max(checkpoint_id) AS last FROM checkpoints GROUP BY thread_id ORDER BY last DESC LIMIT `

// Full scans: every checkpoint row and every blob row.
const (
	scanCheckpointsSQL = `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints`
	scanBlobsSQL       = `SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs`
)

// lgCheckpoint is the checkpoint JSON LangGraph stores (format v4), with
// primitive channel values inline and the others moved to blobs.
type lgCheckpoint struct {
	V               int               `json:"v"`
	TS              string            `json:"ts"`
	ID              string            `json:"id"`
	ChannelValues   lgValues          `json:"channel_values"`
	ChannelVersions map[string]string `json:"channel_versions"`
	VersionsSeen    map[string]any    `json:"versions_seen"`
}

type lgValues struct {
	Summary string `json:"summary"`
}

type lgMetadata struct {
	Source  string         `json:"source"`
	Step    int            `json:"step"`
	Parents map[string]any `json:"parents"`
}

// lgRow is one put: the checkpoint row and its blob rows.
type lgRow struct {
	Thread, NS, ID string
	Parent         *string
	Checkpoint     []byte
	Metadata       []byte
	Blobs          []lgBlob
}

type lgBlob struct {
	Channel, Version, Type string
	Blob                   []byte
}

// lgThreads tracks each thread's last checkpoint id and step, as a
// LangGraph caller carries them in its config (the parent of the next
// put).
type lgThreads struct {
	mu   sync.Mutex
	last map[string]lgHead
	seq  atomic.Uint64
}

type lgHead struct {
	id   string
	step int
}

func newLGThreads() *lgThreads { return &lgThreads{last: make(map[string]lgHead)} }

// next makes the put of checkpoint c on thread: a new time-ordered
// checkpoint id whose parent is the thread's previous one.
func (t *lgThreads) next(thread string, c *records.Checkpoint, now time.Time) (lgRow, error) {
	t.mu.Lock()
	h := t.last[thread]
	id := uuid6(now, t.seq.Add(1))
	t.last[thread] = lgHead{id: id, step: h.step + 1}
	t.mu.Unlock()
	var parent *string
	if h.id != "" {
		p := h.id
		parent = &p
	}
	return makeRow(thread, id, parent, h.step+1, c, now)
}

// makeRow encodes checkpoint c as LangGraph's put would: the summary (a
// string, so inline) in channel_values, the learnings and next steps (lists,
// so blobs, msgpack-typed) in checkpoint_blobs under new channel versions.
func makeRow(thread, id string, parent *string, step int, c *records.Checkpoint, now time.Time) (lgRow, error) {
	vs := map[string]string{
		"summary":    channelVersion(step, rand.Float64()),
		"learnings":  channelVersion(step, rand.Float64()),
		"next_steps": channelVersion(step, rand.Float64()),
	}
	cp, err := json.Marshal(lgCheckpoint{
		V: 4, TS: now.UTC().Format("2006-01-02T15:04:05.000000+00:00"), ID: id,
		ChannelValues:   lgValues{Summary: c.Summary},
		ChannelVersions: vs,
		VersionsSeen:    map[string]any{},
	})
	if err != nil {
		return lgRow{}, fmt.Errorf("encode checkpoint: %w", err)
	}
	md, err := json.Marshal(lgMetadata{Source: "loop", Step: step, Parents: map[string]any{}})
	if err != nil {
		return lgRow{}, fmt.Errorf("encode metadata: %w", err)
	}
	return lgRow{
		Thread: thread, ID: id, Parent: parent, Checkpoint: cp, Metadata: md,
		Blobs: []lgBlob{
			{Channel: "learnings", Version: vs["learnings"], Type: "msgpack", Blob: msgpackStrings(c.Learnings)},
			{Channel: "next_steps", Version: vs["next_steps"], Type: "msgpack", Blob: msgpackStrings(c.NextSteps)},
		},
	}, nil
}

// decodeLG turns a checkpoint row and its channel values (channel, type,
// blob) back into the checkpoint content, as LangGraph's
// _load_checkpoint_tuple does.
func decodeLG(checkpoint []byte, values [][3][]byte) (*records.Checkpoint, error) {
	var cp lgCheckpoint
	if err := json.Unmarshal(checkpoint, &cp); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	c := &records.Checkpoint{Summary: cp.ChannelValues.Summary}
	for _, v := range values {
		list, err := unmsgpackStrings(v[2])
		if err != nil {
			return nil, fmt.Errorf("decode blob %s: %w", v[0], err)
		}
		switch string(v[0]) {
		case "learnings":
			c.Learnings = list
		case "next_steps":
			c.NextSteps = list
		}
	}
	return c, nil
}

// sqliteValues converts the SQLite adaptation's channel_values (a JSON
// array of [channel, type, hex(blob)]) to decodeLG's form.
func sqliteValues(js []byte) ([][3][]byte, error) {
	if len(js) == 0 {
		return nil, nil
	}
	var rows [][3]string
	if err := json.Unmarshal(js, &rows); err != nil {
		return nil, fmt.Errorf("decode channel values: %w", err)
	}
	out := make([][3][]byte, len(rows))
	for i, r := range rows {
		b, err := hex.DecodeString(r[2])
		if err != nil {
			return nil, fmt.Errorf("decode channel values: %w", err)
		}
		out[i] = [3][]byte{[]byte(r[0]), []byte(r[1]), b}
	}
	return out, nil
}
