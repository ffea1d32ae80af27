package log

import (
	"strconv"
	"strings"

	"github.com/spl-dev/spl/records"
)

// backLen bounds the clocks HeaderBack lists. A walk back a thread fetches
// up to backLen+1 records per round trip; 16 keeps the header near 80
// bytes where a thread's records are a few thousand clocks apart.
const backLen = 16

// next is the head after a record with id and header hd lands at clock on
// top of h: it knows where the records before it are when hd's prev is
// h's record.
func (h head) next(id records.ID, hd records.Header, clock uint64) head {
	prev := hd.Prev
	n := head{id: id, clock: clock, idClock: clock, prev: prev, bd: hd.BD}
	if h.idClock > 0 && h.id == prev && !prev.IsZero() {
		n.back = make([]uint64, 0, backLen)
		n.back = append(n.back, h.idClock)
		n.back = append(n.back, h.back[:min(len(h.back), backLen-1)]...)
	}
	return n
}

// copyOf is the entry of rec when h, its thread's head, is rec itself:
// the same body digest (salt and body) and, chained on h's prev, the same
// id. Sealed on h, a record sent again whose first copy is already the
// head (a send delayed past its caller's wait, then sent again: through
// spl serve's door, on another node, log/door.go) would be stored twice;
// the writer answers with the copy instead, as a retry of a record that
// landed is answered (recall).
func (h head) copyOf(rec *records.Record) (Entry, bool) {
	if h.idClock == 0 || h.idClock != h.clock || h.bd != rec.Header.BD {
		return Entry{}, false
	}
	sealed := rec.WithPrev(h.prev)
	if sealed.ID() != h.id {
		return Entry{}, false
	}
	return Entry{Clock: h.clock, ID: h.id, Record: sealed}, true
}

// headerOf is the header of a stored envelope, plain or packed, without
// its body fetched; ok is false for bytes that are no envelope.
func headerOf(data []byte) (records.Header, bool) {
	var r *records.Record
	var err error
	if records.Packed(data) {
		r, _, err = records.UnmarshalStored(data)
	} else {
		r, err = records.Unmarshal(data)
	}
	if err != nil {
		return records.Header{}, false
	}
	return r.Header, true
}

// sealRun is what seal knows of one thread's records in a batch: the head
// the batch chains on, the id of its last record so far, and their
// positions in the batch.
type sealRun struct {
	base head
	last records.ID
	at   []int
}

// backHeader is HeaderBack for the next record of the run, at position
// i: the records before its prev, newest first. Those in the batch are
// listed as distances (the batch's clocks are consecutive), the head it
// chains on by its clock, since the batch's own clocks are not known yet.
func (r *sealRun) backHeader() string {
	var buf [backLen * 8]byte
	b := buf[:0]
	n := 0
	item := func(abs bool, v uint64) {
		if n > 0 {
			b = append(b, ' ')
		}
		if abs {
			b = append(b, '=')
		}
		b = strconv.AppendUint(b, v, 10)
		n++
	}
	// prev is the run's last record, or the base when the run is empty;
	// the run's records before prev come first.
	for j := len(r.at) - 2; j >= 0 && n < backLen; j-- {
		item(false, uint64(r.at[j+1]-r.at[j]))
	}
	if r.base.idClock == 0 {
		return string(b) // the thread has no record before the batch, or its clock is unknown
	}
	if len(r.at) > 0 && n < backLen {
		item(true, r.base.idClock) // the base is before prev: by clock
	}
	last := r.base.idClock
	for _, c := range r.base.back {
		if n == backLen {
			break
		}
		item(false, last-c)
		last = c
	}
	return string(b)
}

// ancestorsOf returns the clocks of the records before m on its thread,
// newest first, as far as m's headers tell: prev's, then HeaderBack's. They
// are hints: a reader checks each record it fetches against the prev of
// the one after it. A malformed or non-decreasing item ends the list.
func ancestorsOf(m stored) []uint64 {
	p := prevClockOf(m)
	if p == 0 || p >= m.clock {
		return nil
	}
	out := make([]uint64, 1, backLen+1)
	out[0] = p
	for f := range strings.FieldsSeq(m.hdr.Get(HeaderBack)) {
		last := out[len(out)-1]
		var c uint64
		if abs, ok := strings.CutPrefix(f, "="); ok {
			v, err := strconv.ParseUint(abs, 10, 64)
			if err != nil {
				break
			}
			c = v
		} else {
			d, err := strconv.ParseUint(f, 10, 64)
			if err != nil || d >= last {
				break
			}
			c = last - d
		}
		if c == 0 || c >= last || len(out) > backLen {
			break
		}
		out = append(out, c)
	}
	return out
}
