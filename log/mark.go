package log

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// The high-water mark.
//
// A stream that someone with the NATS credentials purged, or deleted (and
// spl recreated empty), or a store restored from an older copy, holds
// fewer records than were acknowledged, and nothing inside the stream
// can tell: VerifyAll accounts for every clock up to the stream's last
// one, and a recreated stream's last one is 0. So the log keeps, outside
// the stream, in its data directory, the newest clock it has seen
// acknowledged and the id at it: the file MarkFile, written whole
// (temporary file, fsync, rename, fsync of the directory) and signed with
// an HMAC-SHA256 keyed by the directory's MarkKeyFile (24 random bytes in hex,
// mode 0600).
//
// Why an HMAC keyed by a file of the directory, not the server's key:
// spl serve has no key of its own (NATS token auth is a shared secret
// every client holds, so a mark signed with it could be forged by every
// client, the very party the mark watches), and a file that only the
// directory's owner can read (natsio.CheckDir) is what the mark is kept
// beside anyway. The HMAC does not stop the owner, nor anyone who can
// read the directory; it makes a mark copied from another directory, or
// edited by hand, or written by a process without the key, fail loudly
// instead of moving the watch.
//
// The writer hands the mark every record it lands (a compare under a
// mutex); a goroutine writes it at most every Options.MarkEvery, and Close
// writes it last. A mark is only ever raised, and only while the record
// at the mark on disk is still the one it names: after a loss it stays
// where it was, so the loss stays reported however many records follow.
// CheckMark compares the stream with it: a stream whose last clock is
// behind the mark, or that is empty while the mark is not, or whose
// record at the mark is another one, has lost records.

// Files of the mark in the data directory.
const (
	MarkFile    = "mark"
	MarkKeyFile = "mark.key"
)

// DefaultMarkEvery is how often at most the writer's mark is written.
const DefaultMarkEvery = 100 * time.Millisecond

// Mark is the high-water mark of a stream: the newest clock acknowledged
// and the id of the record at it.
type Mark struct {
	Stream string `json:"stream"`
	Clock  uint64 `json:"clock"`
	ID     string `json:"id"`
	MAC    string `json:"mac"` // HMAC-SHA256 of the fields above, hex
}

// MarkLoss is a stream behind its high-water mark: clocks From to To are
// missing (every record up to To, when the stream is empty).
type MarkLoss struct {
	Mark      Mark
	LastClock uint64 // the stream's last clock
	From, To  uint64 // the clocks missing
	Reason    string
}

// Error says which clocks are missing and why.
func (m *MarkLoss) Error() string {
	return fmt.Sprintf("spl/log: loss: clocks %d–%d missing: %s", m.From, m.To, m.Reason)
}

// Unwrap makes a loss an ErrLoss.
func (m *MarkLoss) Unwrap() error { return ErrLoss }

// ErrLoss is a log that lost records it acknowledged (a *MarkLoss says
// which).
var ErrLoss = errors.New("spl/log: loss")

// goneLoss is the loss of a stream that is gone: every clock up to the
// mark. With no mark to hold it to, it is nil, and err the stream's
// absence.
func (l *Log) goneLoss(err error) (*MarkLoss, error) {
	if l.mark == nil {
		return nil, err
	}
	k, ok, merr := l.mark.read()
	if merr != nil && !errors.Is(merr, errBadMark) || !ok || k.Clock == 0 {
		return nil, err
	}
	return &MarkLoss{Mark: k, From: 1, To: k.Clock, Reason: fmt.Sprintf("the stream %s is gone (deleted) while its high-water mark is at clock %d (%s)", l.opts.Stream, k.Clock, k.ID)}, nil
}

// ErrAppendsRefused is what every append gets from a log whose stream is
// behind its high-water mark (with the *MarkLoss, errors.As): records
// acknowledged once are gone, and appending on would chain new records
// onto the stream that replaced them, where the loss no longer shows in
// their threads. The loss is the operator's to settle: restore the
// stream, or remove DIR/mark to take the stream as it is from now on.
// It is an ErrLoss (errors.Is).
var ErrAppendsRefused = fmt.Errorf("spl/log: appends refused: %w", ErrLoss)

// refusedFor is the error of every append after loss, or nil.
func (l *Log) refusedFor(loss *MarkLoss) error {
	if loss == nil {
		return nil
	}
	fix := "restore the stream"
	if l.mark != nil {
		fix += ", or remove " + filepath.Join(l.mark.dir, MarkFile) + " to take the stream as it is"
	}
	return &appendsRefused{loss, fix}
}

// appendsRefused is ErrAppendsRefused with the loss and its fix.
type appendsRefused struct {
	loss *MarkLoss
	fix  string
}

func (e *appendsRefused) Error() string {
	return "spl/log: appends refused: " + e.loss.Error() + "; " + e.fix
}

func (e *appendsRefused) Unwrap() []error { return []error{ErrAppendsRefused, e.loss} }

// wentBack is the loss of a stream that answered clock for an append
// sent after clock floor was acknowledged: stream clocks never go back,
// unless the stream was deleted and recreated, or restored from an older
// copy.
func (l *Log) wentBack(clock, floor uint64) *MarkLoss {
	loss := &MarkLoss{LastClock: clock, From: 1, To: floor,
		Reason: fmt.Sprintf("the stream stored an append at clock %d, sent after clock %d was acknowledged: it was deleted and recreated, or restored from an older copy", clock, floor)}
	if l.mark != nil {
		if k, ok, err := l.mark.read(); err == nil && ok {
			loss.Mark = k
		}
	}
	return loss
}

// streamGone reports whether err says the log's stream does not exist.
func streamGone(err error) bool { return errors.Is(err, jetstream.ErrStreamNotFound) }

type marker struct {
	l     *Log
	dir   string
	key   []byte
	keyF  *os.File // flocked while the mark is read and written, across processes
	every time.Duration

	mu      sync.Mutex
	clock   uint64
	id      records.ID
	written uint64 // the clock of the mark on disk, as this process last saw it

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newMarker(l *Log, dir string) (*marker, error) {
	key, _, err := natsio.Secret(dir, MarkKeyFile)
	if err != nil {
		return nil, fmt.Errorf("mark key: %w", err)
	}
	f, err := os.Open(filepath.Join(dir, MarkKeyFile))
	if err != nil {
		return nil, fmt.Errorf("mark key: %w", err)
	}
	m := &marker{l: l, dir: dir, key: []byte(key), keyF: f, every: l.opts.MarkEvery,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m, nil
}

// saw tells the marker that the record id landed at clock. It is on the
// writer's path: no I/O.
func (m *marker) saw(clock uint64, id records.ID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if clock > m.clock {
		m.clock, m.id = clock, id
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *marker) run() {
	defer close(m.done)
	for {
		select {
		case <-m.kick:
		case <-m.quit:
			return
		}
		_ = m.write() // a mark not raised is only a weaker watch; Close tries again
		select {
		case <-time.After(m.every):
		case <-m.quit:
			return
		}
	}
}

// stop ends the goroutine and writes the mark a last time.
func (m *marker) stop() error {
	if m == nil {
		return nil
	}
	close(m.quit)
	<-m.done
	err := m.write()
	m.keyF.Close()
	return err
}

func (m *marker) sign(k Mark) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte("spl-mark-v1\x00" + k.Stream + "\x00" + strconv.FormatUint(k.Clock, 10) + "\x00" + k.ID))
	return hex.EncodeToString(h.Sum(nil))
}

// read returns the mark on disk; ok is false when there is none.
func (m *marker) read() (k Mark, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(m.dir, MarkFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Mark{}, false, nil
	}
	if err != nil {
		return Mark{}, false, fmt.Errorf("read mark: %w", err)
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return Mark{}, true, fmt.Errorf("mark %s: %w", filepath.Join(m.dir, MarkFile), errBadMark)
	}
	if !hmac.Equal([]byte(k.MAC), []byte(m.sign(k))) || k.Stream != m.l.opts.Stream {
		return k, true, fmt.Errorf("mark %s: %w", filepath.Join(m.dir, MarkFile), errBadMark)
	}
	return k, true, nil
}

var errBadMark = errors.New("does not verify with the directory's key (edited, copied from another directory, or of another stream)")

// write raises the mark on disk to the newest record seen, if it is
// higher and the stream still holds the record the mark on disk names.
func (m *marker) write() error {
	m.mu.Lock()
	clock, id := m.clock, m.id
	m.mu.Unlock()
	if clock == 0 {
		return nil
	}
	if err := syscall.Flock(int(m.keyF.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("mark: lock: %w", err)
	}
	defer syscall.Flock(int(m.keyF.Fd()), syscall.LOCK_UN)
	old, ok, err := m.read()
	if err != nil {
		return err // a mark that does not verify is kept for CheckMark to report
	}
	if ok && old.Clock >= clock {
		m.wrote(old.Clock)
		return nil
	}
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), m.l.opts.Timeout)
		defer cancel()
		at, err := m.l.get(ctx, getRequest{Seq: old.Clock})
		switch {
		case err == nil && at.hdr.Get(HeaderID) != old.ID:
			return fmt.Errorf("mark: the record at clock %d is not %s: the mark stays", old.Clock, old.ID)
		case err != nil && !errors.Is(err, ErrNotFound):
			return fmt.Errorf("mark: %w", err)
		}
		// Not found: erased, or purged; verify tells which.
	}
	k := Mark{Stream: m.l.opts.Stream, Clock: clock, ID: id.String()}
	k.MAC = m.sign(k)
	if err := natsio.WriteJSONFile(filepath.Join(m.dir, MarkFile), k); err != nil {
		return err
	}
	m.wrote(clock)
	return nil
}

func (m *marker) wrote(clock uint64) {
	m.mu.Lock()
	m.written = max(m.written, clock)
	m.mu.Unlock()
}

// onDisk reports whether the mark on disk is at clock or past it.
func (m *marker) onDisk(clock uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written >= clock
}

// MarkNow raises the mark to the stream's last record, whoever appended
// it (spl serve calls it for the appends of its NATS clients, which do
// not go through its writer). It does nothing on a log that keeps no
// mark.
func (l *Log) MarkNow(ctx context.Context) error {
	if l.mark == nil {
		return nil
	}
	last, err := l.LastClock(ctx)
	if err != nil || last == 0 || l.mark.onDisk(last) {
		return err // nothing new since the mark was written
	}
	at, err := l.get(ctx, getRequest{Seq: last})
	if errors.Is(err, ErrNotFound) {
		return nil // the last record was erased: the next append moves the mark
	}
	if err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	id, err := records.ParseID(at.hdr.Get(HeaderID))
	if err != nil {
		return nil // not a record of ours: verify reports it
	}
	// The record at last may be stored and not yet durable (a group
	// commit between its store and its fsync, or a publish nobody
	// fsyncs): a mark naming it, were the power cut then, would be ahead
	// of the stream, and the log would take itself for one that lost
	// records and refuse appends. So it is made durable first.
	if l.blocks != nil {
		if err := l.blocks.Sync(); err != nil {
			return fmt.Errorf("mark: %w", err)
		}
	}
	l.mark.saw(last, id)
	return l.mark.write()
}

// CheckMark compares the stream with its high-water mark and returns the
// loss it finds, or nil: a stream behind the mark (deleted and recreated,
// or restored from an older copy), empty while the mark is not (purged),
// or holding another record at the mark's clock. A mark that does not
// verify is reported as a loss of the whole watch. A log that keeps no
// mark (a client of a remote server: the server keeps it) returns nil.
func (l *Log) CheckMark(ctx context.Context) (*MarkLoss, error) {
	if l.door != nil {
		return l.door.loss(ctx)
	}
	if l.mark == nil {
		return nil, nil
	}
	st, err := l.Stats(ctx)
	if streamGone(err) {
		if loss, err := l.goneLoss(err); loss != nil || err != nil {
			return loss, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("check mark: %w", err)
	}
	return l.markLoss(ctx, st)
}

// markLoss is CheckMark against statistics already read.
func (l *Log) markLoss(ctx context.Context, st Stats) (*MarkLoss, error) {
	if l.mark == nil {
		return nil, nil
	}
	k, ok, err := l.mark.read()
	if errors.Is(err, errBadMark) {
		return &MarkLoss{Mark: k, From: 1, To: k.Clock, Reason: "the high-water mark " + err.Error()}, nil
	}
	if err != nil || !ok {
		return nil, err
	}
	return l.checkMark(ctx, k, st)
}

// checkMark is CheckMark of mark k against the stream's statistics st.
func (l *Log) checkMark(ctx context.Context, k Mark, st Stats) (*MarkLoss, error) {
	loss := &MarkLoss{Mark: k, LastClock: st.LastClock, To: k.Clock}
	switch {
	case st.LastClock < k.Clock:
		loss.From = st.LastClock + 1
		loss.Reason = fmt.Sprintf("the stream ends at clock %d, behind its high-water mark %d (%s): it was deleted and recreated, or restored from an older copy", st.LastClock, k.Clock, k.ID)
		return loss, nil
	case st.Records == 0:
		loss.From = 1
		loss.Reason = fmt.Sprintf("the stream is empty while its high-water mark is at clock %d (%s): it was purged", k.Clock, k.ID)
		return loss, nil
	}
	at, err := l.get(ctx, getRequest{Seq: k.Clock})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil // erased or deleted: VerifyAll accounts for it
	case err != nil:
		return nil, fmt.Errorf("check mark: %w", err)
	case at.hdr.Get(HeaderID) != k.ID:
		loss.From = 1
		loss.Reason = fmt.Sprintf("the record at the high-water mark, clock %d, is %s, not %s: the stream was replaced", k.Clock, at.hdr.Get(HeaderID), k.ID)
		return loss, nil
	}
	return nil, nil
}
