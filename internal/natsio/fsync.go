package natsio

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BlockSyncer makes durable what the embedded server wrote to the log's
// stream: it fsyncs the stream's message block files.
//
// The embedded server runs without SyncAlways: it writes every message to
// its block file before it acks it (flush in place, the file store's mode
// for a single replica), and leaves the fsync to the writer, which issues
// one per group commit for all the appends of the group, before it
// answers any of them. fsync(2) writes back a file's dirty pages whoever
// wrote them, so one fsync of the block (and of the ones the group rolled
// over to) covers every message of the group. See "Appends and group
// commit" in docs/design.md for why and what it measures.
//
// Appends only ever go to the stream's last block, so what a group wrote
// is in the last block the previous sync saw and in the blocks created
// since (block indexes grow by one). The server may replace a block by
// renaming a rewritten copy over it (compaction, secure delete); such a
// copy is fsynced by the server before the rename, and the rename changes
// the directory, upon which the syncer opens the blocks anew by name.
type BlockSyncer struct {
	dir string // the stream's msgs directory

	mu      sync.Mutex
	hi      int       // highest block index known; 0 before the first sync
	f       *os.File  // block hi, open
	dirTime time.Time // mtime of dir when hi was found by a scan
}

// NewBlockSyncer syncs the blocks of stream in the embedded store under
// dataDir (the account is the global one: the embedded server has no
// accounts).
func NewBlockSyncer(dataDir, stream string) *BlockSyncer {
	return &BlockSyncer{dir: filepath.Join(dataDir, "jetstream", "$G", "streams", stream, "msgs")}
}

// Check confirms that the store is laid out as the syncer expects, so a
// server upgrade that moves it fails loudly at open, not silently at the
// first power loss.
func (s *BlockSyncer) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.scan(); err != nil {
		return fmt.Errorf("stream store: %w", err)
	}
	return nil
}

// Sync fsyncs the blocks written since the last sync.
func (s *BlockSyncer) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	if s.f == nil || s.dirChanged() {
		// First sync, or blocks were created, removed or replaced: find
		// the last block again, and sync the ones since the last known.
		prev := s.hi
		s.closeBlock()
		hi, err := s.scan()
		if err != nil {
			return err
		}
		for i := max(prev, 1); i < hi; i++ {
			if err := SyncFile(s.block(i)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("fsync log: %w", err)
			}
		}
		grew = prev != 0 && hi != prev
		s.hi = hi
	}
	// Blocks the server rolled over to since (the directory's mtime says
	// so too, but its granularity may be coarse).
	for {
		if _, err := os.Stat(s.block(s.hi + 1)); errors.Is(err, fs.ErrNotExist) {
			break
		} else if err != nil {
			return fmt.Errorf("fsync log: %w", err)
		}
		if err := s.syncBlock(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		s.closeBlock()
		s.hi++
		grew = true
	}
	if err := s.syncBlock(); err != nil {
		return err
	}
	if grew {
		// New directory entries must be durable too.
		if err := SyncFile(s.dir); err != nil {
			return fmt.Errorf("fsync log: %w", err)
		}
	}
	return nil
}

// syncBlock fsyncs block hi, opening it when it is not open.
func (s *BlockSyncer) syncBlock() error {
	if s.f == nil {
		f, err := os.Open(s.block(s.hi))
		if err != nil {
			return fmt.Errorf("fsync log: %w", err)
		}
		s.f = f
	}
	if err := s.f.Sync(); err != nil {
		s.closeBlock()
		return fmt.Errorf("fsync log: %d.blk: %w", s.hi, err)
	}
	return nil
}

func (s *BlockSyncer) closeBlock() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// Known is the highest block index the syncer knows (0 before its first
// sync): the block appends went to at its last sync.
func (s *BlockSyncer) Known() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hi
}

// Close releases the open block.
func (s *BlockSyncer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeBlock()
}

// SyncAll fsyncs every block and the directory: after secure deletes,
// which rewrite blocks anywhere in the stream.
func (s *BlockSyncer) SyncAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("fsync log: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".blk") {
			continue
		}
		if err := SyncFile(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fsync log: %w", err)
		}
	}
	if err := SyncFile(s.dir); err != nil {
		return fmt.Errorf("fsync log: %w", err)
	}
	return nil
}

func (s *BlockSyncer) block(i int) string {
	return filepath.Join(s.dir, strconv.Itoa(i)+".blk")
}

// dirChanged reports whether the directory changed since the last scan
// (a block created, removed or renamed over).
func (s *BlockSyncer) dirChanged() bool {
	fi, err := os.Stat(s.dir)
	return err != nil || !fi.ModTime().Equal(s.dirTime)
}

// scan finds the highest block index in the directory, and notes the
// directory's mtime (taken before reading it, so that a change during the
// scan shows at the next sync).
func (s *BlockSyncer) scan() (int, error) {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return 0, fmt.Errorf("fsync log: %w", err)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("fsync log: %w", err)
	}
	hi := 0
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(n); err == nil && i > hi {
			hi = i
		}
	}
	if hi == 0 {
		return 0, fmt.Errorf("fsync log: no message block in %s", s.dir)
	}
	s.dirTime = fi.ModTime()
	return hi, nil
}

// SyncFile fsyncs the file or directory at path: a directory's fsync
// makes the names in it durable. Its errors name path; the caller says
// what the fsync was for.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return &fs.PathError{Op: "fsync", Path: path, Err: err}
	}
	return nil
}

// WriteJSONFile writes v as JSON to path whole: a temporary file in the
// same directory (mode 0600), fsynced, renamed over path, and the
// directory fsynced, so that a reader sees the old file or the new one,
// never part of one, and a power cut keeps what was written. The
// temporary file is removed on failure (a full disk leaves it torn).
func WriteJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err == nil {
		err = SyncFile(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
