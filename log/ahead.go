package log

import (
	"context"
	"runtime"
	"sync"
)

// Reading ahead (ToEnd). A read that goes to the end of a thread waits, per
// page, for the server to gather and send the page, then decodes and
// verifies its records: the server idles while the reader verifies, and
// the reader while the server reads. Read with ToEnd asks for the next page
// as soon as a page is in hand, and verifies a page on every core, so the
// two overlap. A reader that stops early has had one page fetched for
// nothing, hence the option.

// ToEnd tells Read that the caller reads to the end (as a resume or a
// verification does): the next page is fetched while the caller takes
// one, and each page is verified on every core before its first record
// is yielded. Every record is verified as without it.
func ToEnd() ReadOption { return func(o *readOpts) { o.toEnd = true } }

// page is a batched direct get's answer.
type page struct {
	ms   []stored
	more bool
	err  error
}

// scanAhead is scan for a reader that reads to the end: fn gets each page
// whole, while the next one is on its way.
func (l *Log) scanAhead(ctx context.Context, filter string, from uint64, size int, fn func([]stored) bool) error {
	if from == 0 {
		from = 1
	}
	fetch := func(from uint64) <-chan page {
		ch := make(chan page, 1)
		go func() {
			ms, more, err := l.getBatch(ctx, getRequest{Seq: from, NextFor: filter, Batch: size}, nil)
			ch <- page{ms, more, err}
		}()
		return ch
	}
	next := fetch(from)
	for {
		if l.readsClosed() {
			return ErrClosed
		}
		p := <-next
		if p.err == nil && len(p.ms) > 0 && p.more {
			next = fetch(p.ms[len(p.ms)-1].clock + 1)
		} else {
			next = nil
		}
		if !fn(p.ms) || next == nil {
			// A page asked for and not taken is left to its own
			// timeout: its goroutine ends with its answer.
			return p.err
		}
	}
}

// decodePage verifies the messages of a page on every core: entries[i]
// and errs[i] are ms[i]'s.
func (l *Log) decodePage(ms []stored) (entries []Entry, errs []error) {
	entries, errs = make([]Entry, len(ms)), make([]error, len(ms))
	workers := min(runtime.GOMAXPROCS(0), (len(ms)+31)/32)
	if workers <= 1 {
		for i, m := range ms {
			entries[i], errs[i] = l.decode(m)
		}
		return entries, errs
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(ms); i += workers {
				entries[i], errs[i] = l.decode(ms[i])
			}
		})
	}
	wg.Wait()
	return entries, errs
}
