package natsio

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/minio/highwayhash"
)

// Why a secure delete needs a scrub after a crash.
//
// nats-server (2.15, file store) secure-deletes a message in two writes:
// first a delete tombstone appended to the last block, then the message
// block rewritten with the message overwritten by random bytes. A server
// killed between the two (the rewrite of an 8 MiB block is the slow part)
// comes back with the tombstone, so the message counts as deleted, and
// with the message's bytes intact in its block. Asked again, the server
// does nothing: a deleted message is not erased twice. Nothing but a
// compaction of that block, which the server may never do, would remove
// the bytes. A rewrite killed before its rename also leaves the block's
// temporary copy (N.blk.tmp), which holds the messages of the block that
// were not erased yet, and which the server never reads nor removes.
//
// So a process about to secure-delete messages of the embedded log's
// stream first records their sequences in an intent file under
// <dir>/erasing/ (BeginErase), and removes it when the deletes are done
// and durable (EraseIntent.Done). The process that starts the directory's
// server next scrubs before the server opens the store, while no server
// runs: it removes temporary block copies, and overwrites each message an
// intent names that a tombstone marks deleted but whose bytes are still
// plain, exactly as the server's own secure delete does (same record
// length, the erased bit set, random bytes, a valid checksum), so the
// server reads it as the erased message it is. A message still live is
// left alone: the log's deletes, resumed on open, erase it through the
// server.
//
// The blocks of an encrypted store (atrest.go) are not scrubbed: their
// records cannot be read without the server's keys. A secure delete that
// a kill left half done there leaves the message's ciphertext in its
// block, readable with the store's key, until the server rewrites or
// compacts that block; the temporary copies are removed as above.

// erasingDir holds the intent files of a data directory.
const erasingDir = "erasing"

// Record layout of a nats-server (2.12–2.15) message block, unencrypted
// and uncompressed: a 22-byte header (length with the headers bit,
// sequence with the erased and tombstone bits, timestamp, subject
// length), the subject, headers, payload, and an 8-byte highwayhash.
const (
	blkHdrSize  = 22
	blkHashSize = 8
	blkHbit     = 1 << 31
	blkEbit     = 1 << 63
	blkTbit     = 1 << 62
)

// EraseIntent is a pending secure delete of messages of the embedded
// log's stream, on disk until Done.
type EraseIntent struct {
	f *os.File // flocked while this process is alive
}

// BeginErase records that this process is about to secure-delete the
// messages seqs of stream, so that a server killed meanwhile is scrubbed
// before it serves again. It returns nil and no error when the connection
// is not to an embedded server: a remote server's files are its own.
func (c *Conn) BeginErase(stream string, seqs []uint64) (*EraseIntent, error) {
	if c.emb == nil || len(seqs) == 0 {
		return nil, nil
	}
	dir := filepath.Join(c.dir, erasingDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("erase intent: %w", err)
	}
	f, err := os.CreateTemp(dir, "intent.*")
	if err != nil {
		return nil, fmt.Errorf("erase intent: %w", err)
	}
	fail := func(err error) (*EraseIntent, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("erase intent: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fail(err)
	}
	var b strings.Builder
	b.WriteString(stream + "\n")
	for _, s := range seqs {
		b.WriteString(strconv.FormatUint(s, 10) + "\n")
	}
	if _, err := f.WriteString(b.String()); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := SyncFile(dir); err != nil {
		return fail(err)
	}
	return &EraseIntent{f: f}, nil
}

// Done removes the intent: the deletes it announced are done and durable.
func (i *EraseIntent) Done() error {
	if i == nil || i.f == nil {
		return nil
	}
	err := os.Remove(i.f.Name())
	i.f.Close()
	i.f = nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("erase intent: %w", err)
	}
	return nil
}

// Close releases the intent without removing it (the deletes did not all
// happen): the next server start scrubs what it names.
func (i *EraseIntent) Close() {
	if i != nil && i.f != nil {
		i.f.Close()
		i.f = nil
	}
}

// scrub finishes, on disk, the secure deletes that a killed server left
// half done in the store of dataDir (see the top of this file). It must
// run while no server runs on the directory: the caller holds its lock.
// An intent whose process is gone is removed once scrubbed; one whose
// process still runs (a client of the killed server, about to resume its
// deletes on the next one) is scrubbed and kept.
func scrub(dataDir string) error {
	dir := filepath.Join(dataDir, erasingDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scrub: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "intent.") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := scrubIntent(dataDir, path); err != nil {
			return fmt.Errorf("scrub %s: %w", path, err)
		}
	}
	return nil
}

func scrubIntent(dataDir, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // done meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	gone := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	stream, seqs, err := readIntent(f)
	if err != nil {
		if gone {
			// Torn by a crash while it was written: its deletes had not
			// begun (they begin once it is synced).
			return os.Remove(path)
		}
		return nil
	}
	msgs := filepath.Join(dataDir, "jetstream", "$G", "streams", stream, "msgs")
	if err := scrubBlocks(msgs, stream, seqs); err != nil {
		return err
	}
	if gone {
		return os.Remove(path)
	}
	return nil
}

func readIntent(f *os.File) (string, map[uint64]bool, error) {
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() == "" || strings.ContainsAny(sc.Text(), "/\\") {
		return "", nil, errors.New("no stream name")
	}
	stream := sc.Text()
	seqs := make(map[uint64]bool)
	for sc.Scan() {
		s, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			return "", nil, err
		}
		seqs[s] = true
	}
	return stream, seqs, sc.Err()
}

// plainRecord is where a message named by an intent lies, unerased.
type plainRecord struct {
	block int
	off   int64
	rl    uint32
	seq   uint64
}

// scrubBlocks removes the temporary block copies in msgs and overwrites
// the plain records of seqs that a tombstone marks deleted.
func scrubBlocks(msgs, stream string, seqs map[uint64]bool) error {
	ents, err := os.ReadDir(msgs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var blocks []int
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".blk.tmp") {
			if err := os.Remove(filepath.Join(msgs, name)); err != nil {
				return err
			}
			continue
		}
		if n, ok := strings.CutSuffix(name, ".blk"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				blocks = append(blocks, i)
			}
		}
	}
	sort.Ints(blocks)
	deleted := make(map[uint64]bool)
	var plain []plainRecord
	for _, i := range blocks {
		if _, err := os.Stat(filepath.Join(msgs, strconv.Itoa(i)+".key")); err == nil {
			// Encrypted (atrest.go): its records cannot be read here,
			// and a tombstone in it cannot be seen. What a half-done
			// secure delete leaves of a message in it is ciphertext.
			continue
		}
		buf, err := os.ReadFile(filepath.Join(msgs, strconv.Itoa(i)+".blk"))
		if err != nil {
			return err
		}
		for off := 0; off+blkHdrSize <= len(buf); {
			le := binary.LittleEndian
			rl := le.Uint32(buf[off:]) &^ blkHbit
			seq := le.Uint64(buf[off+4:])
			if rl < blkHdrSize+blkHashSize || off+int(rl) > len(buf) {
				break // a torn tail: the server truncates it on recovery
			}
			switch {
			case seq&blkTbit != 0:
				deleted[seq&^blkTbit] = true
			case seq&blkEbit == 0 && seqs[seq]:
				plain = append(plain, plainRecord{block: i, off: int64(off), rl: rl, seq: seq})
			}
			off += int(rl)
		}
	}
	for _, p := range plain {
		if !deleted[p.seq] {
			continue // live: the log's resumed deletes erase it through the server
		}
		if err := eraseRecord(msgs, stream, p); err != nil {
			return err
		}
	}
	if len(plain) > 0 {
		return SyncFile(msgs)
	}
	return nil
}

// eraseRecord overwrites the record p in place as the server's secure
// delete (msgBlock.eraseMsg) writes it, and syncs the block.
func eraseRecord(msgs, stream string, p plainRecord) error {
	rec := make([]byte, p.rl)
	le := binary.LittleEndian
	le.PutUint32(rec[0:], p.rl)
	le.PutUint64(rec[4:], p.seq|blkEbit)
	// timestamp and subject length stay zero
	data := rec[blkHdrSize : int(p.rl)-blkHashSize]
	if _, err := rand.Read(data); err != nil {
		return err
	}
	key := sha256.Sum256(fmt.Appendf(nil, "%s-%d", stream, p.block))
	hh, err := highwayhash.NewDigest64(key[:])
	if err != nil {
		return err
	}
	hh.Write(rec[4:20])
	hh.Write(data)
	hh.Sum(rec[int(p.rl)-blkHashSize:][:0])
	f, err := os.OpenFile(filepath.Join(msgs, strconv.Itoa(p.block)+".blk"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(rec, p.off); err != nil {
		return err
	}
	return f.Sync()
}
