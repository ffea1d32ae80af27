package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/spl-dev/spl/records"
)

// sqlitePeer is SQLite (mattn/go-sqlite3, in process) with LangGraph's
// Postgres schema adapted to SQLite, WAL journal, synchronous=FULL (an
// fsync of the WAL at every commit). Like LangGraph's SqliteSaver it uses
// one connection, so saves from many goroutines take turns.
type sqlitePeer struct {
	root string
}

var _ Peer = (*sqlitePeer)(nil)

// sqliteSchema is the end state of LangGraph's MIGRATIONS in SQLite types:
// JSONB becomes TEXT (JSON text), BYTEA becomes BLOB; the ALTERs are
// folded into the CREATEs (SQLite cannot drop a NOT NULL in place), and
// the indexes are created without CONCURRENTLY.
var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS checkpoint_migrations (v INTEGER PRIMARY KEY)`,
	`CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)`,
	`CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)`,
	`CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BLOB NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)`,
	`CREATE INDEX IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id)`,
	`CREATE INDEX IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id)`,
	`CREATE INDEX IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id)`,
}

// sqliteSelect is SELECT_SQL in SQLite: jsonb_each_text becomes
// json_each, array_agg of byte arrays becomes json_group_array of
// [channel, type, hex(blob)].
const sqliteSelect = `
select
    thread_id,
    checkpoint,
    checkpoint_ns,
    checkpoint_id,
    parent_checkpoint_id,
    metadata,
    (
        select json_group_array(json_array(bl.channel, bl.type, hex(bl.blob)))
        from json_each(checkpoints.checkpoint, '$.channel_versions') je
        inner join checkpoint_blobs bl
            on bl.thread_id = checkpoints.thread_id
            and bl.checkpoint_ns = checkpoints.checkpoint_ns
            and bl.channel = je.key
            and bl.version = je.value
    ) as channel_values,
    (
        select json_group_array(json_array(cw.task_id, cw.channel, cw.type, hex(cw.blob)) order by cw.task_id, cw.idx)
        from checkpoint_writes cw
        where cw.thread_id = checkpoints.thread_id
            and cw.checkpoint_ns = checkpoints.checkpoint_ns
            and cw.checkpoint_id = checkpoints.checkpoint_id
    ) as pending_writes
from checkpoints `

const (
	sqliteGetLatest  = sqliteSelect + `WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`
	sqliteList       = sqliteSelect + `WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT ?`
	sqliteUpsertBlob = `INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`
	sqliteUpsertCheckpoint = `INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
    DO UPDATE SET
        checkpoint = excluded.checkpoint,
        metadata = excluded.metadata`
)

// Name implements Peer.
func (p *sqlitePeer) Name() string { return "sqlite" }

func (p *sqlitePeer) dir(loc string) string { return filepath.Join(p.root, loc) }

func (p *sqlitePeer) open(ctx context.Context, loc string) (*sqliteStore, error) {
	if err := os.MkdirAll(p.dir(loc), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	dsn := "file:" + filepath.Join(p.dir(loc), "checkpoints.db") +
		"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=30000&_txlock=immediate"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite open: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	for _, q := range sqliteSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite schema: %w", err)
		}
	}
	s := &sqliteStore{db: db, threads: newLGThreads()}
	for _, st := range []struct {
		p **sql.Stmt
		q string
	}{{&s.latest, sqliteGetLatest}, {&s.list, sqliteList}, {&s.upBlob, sqliteUpsertBlob}, {&s.upCkpt, sqliteUpsertCheckpoint}} {
		if *st.p, err = db.PrepareContext(ctx, st.q); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite prepare: %w", err)
		}
	}
	return s, nil
}

// Open implements Peer.
func (p *sqlitePeer) Open(ctx context.Context, loc string) (Store, error) { return p.open(ctx, loc) }

// Fill implements Peer: plain inserts in transactions of 10,000 puts.
func (p *sqlitePeer) Fill(ctx context.Context, loc string, plan *Plan) error {
	s, err := p.open(ctx, loc)
	if err != nil {
		return err
	}
	defer s.Close()
	var tx *sql.Tx
	var blob, ckpt *sql.Stmt
	for i := range plan.Records {
		if i%10000 == 0 {
			if tx != nil {
				if err := tx.Commit(); err != nil {
					return fmt.Errorf("fill commit: %w", err)
				}
			}
			if tx, err = s.db.BeginTx(ctx, nil); err != nil {
				return fmt.Errorf("fill begin: %w", err)
			}
			blob, ckpt = tx.Stmt(s.upBlob), tx.Stmt(s.upCkpt)
		}
		c := content(i, int(plan.Step[i]))
		row, err := s.threads.next(threadName(int(plan.Thread[i])), &c, time.Now())
		if err != nil {
			return err
		}
		if err := s.put(ctx, blob, ckpt, row); err != nil {
			tx.Rollback()
			return fmt.Errorf("fill record %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fill commit: %w", err)
	}
	return nil
}

// ColdOpen implements Peer: open the database (schema statements included,
// as a LangGraph saver's setup runs them) and read one latest checkpoint.
func (p *sqlitePeer) ColdOpen(ctx context.Context, loc, probe string) (Store, time.Duration, error) {
	t0 := time.Now()
	s, err := p.open(ctx, loc)
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.Latest(ctx, probe); err != nil {
		s.Close()
		return nil, 0, fmt.Errorf("first read: %w", err)
	}
	return s, time.Since(t0), nil
}

// DiskBytes implements Peer.
func (p *sqlitePeer) DiskBytes(_ context.Context, loc string) (int64, string, error) {
	n, err := du(p.dir(loc))
	return n, "du of the database file (and its WAL, checkpointed on close)", err
}

// Remove implements Peer.
func (p *sqlitePeer) Remove(_ context.Context, loc string) error { return os.RemoveAll(p.dir(loc)) }

// sqliteStore is an open SQLite database.
type sqliteStore struct {
	db                           *sql.DB
	threads                      *lgThreads
	latest, list, upBlob, upCkpt *sql.Stmt
}

func (s *sqliteStore) put(ctx context.Context, blob, ckpt *sql.Stmt, r lgRow) error {
	for _, b := range r.Blobs {
		if _, err := blob.ExecContext(ctx, r.Thread, r.NS, b.Channel, b.Version, b.Type, b.Blob); err != nil {
			return fmt.Errorf("upsert blob: %w", err)
		}
	}
	var parent any
	if r.Parent != nil {
		parent = *r.Parent
	}
	if _, err := ckpt.ExecContext(ctx, r.Thread, r.NS, r.ID, parent, string(r.Checkpoint), string(r.Metadata)); err != nil {
		return fmt.Errorf("upsert checkpoint: %w", err)
	}
	return nil
}

// Save implements Store: LangGraph's put (blob upserts, then the checkpoint
// upsert) in one transaction, committed (WAL fsynced) before it returns.
func (s *sqliteStore) Save(ctx context.Context, _ int, thread string, c *records.Checkpoint) error {
	row, err := s.threads.next(thread, c, time.Now())
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := s.put(ctx, tx.Stmt(s.upBlob), tx.Stmt(s.upCkpt), row); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func scanLG(rows interface{ Scan(...any) error }) (*records.Checkpoint, error) {
	var thread, cp, ns, id, md string
	var parent sql.NullString
	var values, writes []byte
	if err := rows.Scan(&thread, &cp, &ns, &id, &parent, &md, &values, &writes); err != nil {
		return nil, err
	}
	vs, err := sqliteValues(values)
	if err != nil {
		return nil, err
	}
	var meta lgMetadata
	if err := json.Unmarshal([]byte(md), &meta); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	return decodeLG([]byte(cp), vs)
}

// Latest implements Store: get_tuple's query without a checkpoint id.
func (s *sqliteStore) Latest(ctx context.Context, thread string) (*records.Checkpoint, error) {
	return scanLG(s.latest.QueryRowContext(ctx, thread, ""))
}

// Last implements Store: list(config, limit=n).
func (s *sqliteStore) Last(ctx context.Context, thread string, n int) (int, error) {
	rows, err := s.list.QueryContext(ctx, thread, "", n)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		if _, err := scanLG(rows); err != nil {
			return got, err
		}
		got++
	}
	return got, rows.Err()
}

// Recent implements Store: a GROUP BY over the checkpoints table.
func (s *sqliteStore) Recent(ctx context.Context, n int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, recentSQL+strconv.Itoa(n))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t, last string
		if err := rows.Scan(&t, &last); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Scan implements Store: every checkpoint row (its JSON decoded) and every
// blob row (its msgpack decoded).
func (s *sqliteStore) Scan(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, scanCheckpointsSQL)
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		var thread, ns, id, cp, md string
		var parent sql.NullString
		if err := rows.Scan(&thread, &ns, &id, &parent, &cp, &md); err != nil {
			rows.Close()
			return n, err
		}
		var c lgCheckpoint
		if err := json.Unmarshal([]byte(cp), &c); err != nil {
			rows.Close()
			return n, fmt.Errorf("decode checkpoint: %w", err)
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return n, err
	}
	rows, err = s.db.QueryContext(ctx, scanBlobsSQL)
	if err != nil {
		return n, err
	}
	defer rows.Close()
	for rows.Next() {
		var thread, ns, ch, ver, typ string
		var blob []byte
		if err := rows.Scan(&thread, &ns, &ch, &ver, &typ, &blob); err != nil {
			return n, err
		}
		if _, err := unmsgpackStrings(blob); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
}

// Close implements Store.
func (s *sqliteStore) Close() error { return s.db.Close() }
