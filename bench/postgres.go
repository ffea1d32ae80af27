package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spl-dev/spl/records"
)

// pgPeer is PostgreSQL with LangGraph's checkpoint schema and queries,
// over loopback TCP (pgx), one connection per concurrent writer as a
// LangGraph ConnectionPool would hand out. A put is LangGraph's pipeline:
// the blob upserts and the checkpoint upsert sent together, run as one
// implicit transaction, committed with synchronous_commit on (the WAL is
// flushed before the commit returns).
type pgPeer struct {
	srv *PGServer
}

var _ Peer = (*pgPeer)(nil)

// Name implements Peer.
func (p *pgPeer) Name() string { return "postgres" }

func (p *pgPeer) admin(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, p.srv.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("postgres connect: %w", err)
	}
	defer c.Close(ctx)
	return fn(c)
}

// ensureDB creates database loc if missing.
func (p *pgPeer) ensureDB(ctx context.Context, loc string) error {
	return p.admin(ctx, func(c *pgx.Conn) error {
		var one int
		err := c.QueryRow(ctx, `SELECT 1 FROM pg_database WHERE datname = $1`, loc).Scan(&one)
		if err == pgx.ErrNoRows {
			_, err = c.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{loc}.Sanitize())
		}
		if err != nil {
			return fmt.Errorf("create database %s: %w", loc, err)
		}
		return nil
	})
}

// setup is LangGraph's PostgresSaver.setup(): the migrations not yet
// recorded in checkpoint_migrations, each in autocommit.
func setup(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, pgMigrations[0]); err != nil {
		return fmt.Errorf("migration 0: %w", err)
	}
	version := -1
	err := c.QueryRow(ctx, `SELECT v FROM checkpoint_migrations ORDER BY v DESC LIMIT 1`).Scan(&version)
	if err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("migrations: %w", err)
	}
	for v := version + 1; v < len(pgMigrations); v++ {
		if _, err := c.Exec(ctx, pgMigrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := c.Exec(ctx, `INSERT INTO checkpoint_migrations (v) VALUES ($1)`, v); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}

func (p *pgPeer) open(ctx context.Context, loc string) (*pgStore, error) {
	if err := p.ensureDB(ctx, loc); err != nil {
		return nil, err
	}
	s := &pgStore{dsn: p.srv.DSN(loc), threads: newLGThreads()}
	c, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	defer s.put(c)
	if err := setup(ctx, c); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Open implements Peer.
func (p *pgPeer) Open(ctx context.Context, loc string) (Store, error) { return p.open(ctx, loc) }

// Fill implements Peer: COPY of the rows LangGraph's puts would leave, in
// transactions of 20,000 puts, then VACUUM ANALYZE (as autovacuum would
// soon do) and a CHECKPOINT.
func (p *pgPeer) Fill(ctx context.Context, loc string, plan *Plan) error {
	s, err := p.open(ctx, loc)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	defer s.put(c)
	const chunk = 20000
	for lo := 0; lo < plan.Records; lo += chunk {
		hi := min(lo+chunk, plan.Records)
		var ckpts, blobs [][]any
		for i := lo; i < hi; i++ {
			cc := content(i, int(plan.Step[i]))
			r, err := s.threads.next(threadName(int(plan.Thread[i])), &cc, time.Now())
			if err != nil {
				return err
			}
			ckpts = append(ckpts, []any{r.Thread, r.NS, r.ID, r.Parent, string(r.Checkpoint), string(r.Metadata)})
			for _, b := range r.Blobs {
				blobs = append(blobs, []any{r.Thread, r.NS, b.Channel, b.Version, b.Type, b.Blob})
			}
		}
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"checkpoint_blobs"},
				[]string{"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"}, pgx.CopyFromRows(blobs)); err != nil {
				return fmt.Errorf("copy blobs: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"checkpoints"},
				[]string{"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata"}, pgx.CopyFromRows(ckpts)); err != nil {
				return fmt.Errorf("copy checkpoints: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fill records %d-%d: %w", lo, hi, err)
		}
	}
	for _, q := range []string{`VACUUM ANALYZE`, `CHECKPOINT`} {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("fill: %s: %w", q, err)
		}
	}
	return nil
}

// ColdOpen implements Peer: stop the server (not timed), then start it,
// connect, run LangGraph's setup check and read one latest checkpoint.
func (p *pgPeer) ColdOpen(ctx context.Context, loc, probe string) (Store, time.Duration, error) {
	if err := p.srv.Stop(); err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	if err := p.srv.Start(ctx); err != nil {
		return nil, 0, err
	}
	s := &pgStore{dsn: p.srv.DSN(loc), threads: newLGThreads()}
	c, err := s.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	err = setup(ctx, c)
	s.put(c)
	if err == nil {
		_, err = s.Latest(ctx, probe)
	}
	if err != nil {
		s.Close()
		return nil, 0, fmt.Errorf("first read: %w", err)
	}
	return s, time.Since(t0), nil
}

// DiskBytes implements Peer: the database's directory (tables, TOAST,
// indexes, free space and visibility maps), after a CHECKPOINT. The WAL
// (pg_wal, shared by all databases, recycled) is not counted.
func (p *pgPeer) DiskBytes(ctx context.Context, loc string) (int64, string, error) {
	var oid uint32
	err := p.admin(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `CHECKPOINT`); err != nil {
			return err
		}
		return c.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = $1`, loc).Scan(&oid)
	})
	if err != nil {
		return 0, "", fmt.Errorf("postgres disk: %w", err)
	}
	n, err := du(filepath.Join(p.srv.data(), "base", strconv.FormatUint(uint64(oid), 10)))
	return n, "du of the database's directory base/<oid> (heap, TOAST, indexes); WAL not counted", err
}

// Remove implements Peer.
func (p *pgPeer) Remove(ctx context.Context, loc string) error {
	return p.admin(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{loc}.Sanitize()+` WITH (FORCE)`)
		return err
	})
}

// pgStore is a database of the server with a pool of connections.
type pgStore struct {
	dsn     string
	threads *lgThreads

	mu   sync.Mutex
	idle []*pgx.Conn
	all  []*pgx.Conn
}

var _ Store = (*pgStore)(nil)

func (s *pgStore) get(ctx context.Context) (*pgx.Conn, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres connect: %w", err)
	}
	s.mu.Lock()
	s.all = append(s.all, c)
	s.mu.Unlock()
	return c, nil
}

func (s *pgStore) put(c *pgx.Conn) {
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.mu.Unlock()
}

func (s *pgStore) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	defer s.put(c)
	return fn(c)
}

// Save implements Store: LangGraph's put, pipelined as one implicit
// transaction.
func (s *pgStore) Save(ctx context.Context, _ int, thread string, cc *records.Checkpoint) error {
	r, err := s.threads.next(thread, cc, time.Now())
	if err != nil {
		return err
	}
	return s.with(ctx, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, bl := range r.Blobs {
			b.Queue(pgUpsertBlob, r.Thread, r.NS, bl.Channel, bl.Version, bl.Type, bl.Blob)
		}
		b.Queue(pgUpsertCheckpoint, r.Thread, r.NS, r.ID, r.Parent, string(r.Checkpoint), string(r.Metadata))
		if err := c.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		return nil
	})
}

func scanPG(row pgx.Row) (*records.Checkpoint, error) {
	var thread, ns, id string
	var parent *string
	var cp, md []byte
	// array_agg of arrays: two-dimensional bytea arrays, flat in Elements.
	var values, writes pgtype.Array[[]byte]
	if err := row.Scan(&thread, &cp, &ns, &id, &parent, &md, &values, &writes); err != nil {
		return nil, err
	}
	var meta lgMetadata
	if err := json.Unmarshal(md, &meta); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	if len(values.Elements)%3 != 0 {
		return nil, fmt.Errorf("channel values: %d elements, not triples", len(values.Elements))
	}
	vs := make([][3][]byte, 0, len(values.Elements)/3)
	for e := values.Elements; len(e) >= 3; e = e[3:] {
		vs = append(vs, [3][]byte{e[0], e[1], e[2]})
	}
	return decodeLG(cp, vs)
}

// Latest implements Store: get_tuple's query without a checkpoint id.
func (s *pgStore) Latest(ctx context.Context, thread string) (*records.Checkpoint, error) {
	var out *records.Checkpoint
	err := s.with(ctx, func(c *pgx.Conn) error {
		var err error
		out, err = scanPG(c.QueryRow(ctx, pgGetLatest, thread, ""))
		return err
	})
	return out, err
}

// Last implements Store: list(config, limit=n).
func (s *pgStore) Last(ctx context.Context, thread string, n int) (int, error) {
	got := 0
	err := s.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, pgList, thread, "", n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if _, err := scanPG(rows); err != nil {
				return err
			}
			got++
		}
		return rows.Err()
	})
	return got, err
}

// Recent implements Store: a GROUP BY over the checkpoints table.
func (s *pgStore) Recent(ctx context.Context, n int) ([]string, error) {
	var out []string
	err := s.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, recentSQL+strconv.Itoa(n))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t, last string
			if err := rows.Scan(&t, &last); err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

// Scan implements Store: every checkpoint row (its JSON decoded) and every
// blob row (its msgpack decoded), streamed over one connection.
func (s *pgStore) Scan(ctx context.Context) (int, error) {
	n := 0
	err := s.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, scanCheckpointsSQL)
		if err != nil {
			return err
		}
		for rows.Next() {
			var thread, ns, id string
			var parent *string
			var cp, md []byte
			if err := rows.Scan(&thread, &ns, &id, &parent, &cp, &md); err != nil {
				rows.Close()
				return err
			}
			var v lgCheckpoint
			if err := json.Unmarshal(cp, &v); err != nil {
				rows.Close()
				return fmt.Errorf("decode checkpoint: %w", err)
			}
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = c.Query(ctx, scanBlobsSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var thread, ns, ch, ver, typ string
			var blob []byte
			if err := rows.Scan(&thread, &ns, &ch, &ver, &typ, &blob); err != nil {
				return err
			}
			if _, err := unmsgpackStrings(blob); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return n, err
}

// Close implements Store.
func (s *pgStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.all {
		c.Close(context.Background())
	}
	s.all, s.idle = nil, nil
	return nil
}
