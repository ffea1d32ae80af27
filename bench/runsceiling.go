package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// benchRunsCeiling is the ceiling of the 64-runs figure that one
// JetStream message per step allows on this machine: the server spl's
// embedded log runs, on its options but with no fsync at all (so not
// durable: a ceiling, not a peer), and 64 writers each awaiting a
// synchronous publish of an effect-shaped record to a thread of its own,
// with the headers spl's writer sets (id, the thread's expected last
// clock, the previous record's clock). Each step builds and encodes its
// record as spl does; left out are the chain, the group commit, the run's
// bookkeeping and the fsync. spl's runs cannot pass it.
func benchRunsCeiling(ctx context.Context, dir string) (float64, error) {
	p := &jsPeer{root: dir}
	st, err := p.start(ctx, "ceiling", true)
	if err != nil {
		return 0, err
	}
	defer func() {
		st.Close()
		os.RemoveAll(p.dir("ceiling"))
	}()
	return concurrently(func(w int) (func(int) error, func(), error) {
		thread := fmt.Sprintf("bench/cei/w%d/effects", w)
		var last uint64
		step := func(i int) error {
			r, err := records.New(records.ActDo, "bench.run.effect", thread, "did:sync:bench:runs", time.Now(), effectShaped(w, i))
			if err != nil {
				return err
			}
			data, err := r.Marshal()
			if err != nil {
				return err
			}
			m := nats.NewMsg(splog.RecordSubject(thread, "bench.run.effect"))
			m.Data = data
			m.Header.Set(splog.HeaderID, r.ID().String())
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
			m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", splog.ThreadSubject(thread))
			if last > 0 {
				m.Header.Set(splog.HeaderPrevClock, strconv.FormatUint(last, 10))
			}
			ack, err := st.js.PublishMsg(ctx, m)
			if err != nil {
				return err
			}
			last = ack.Sequence
			return nil
		}
		return step, nil, nil
	})
}
