package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// maxBodyInput bounds the JSON read for one body. It is well above the
// largest record a log takes by default (sdk.DefaultMaxRecord), so a body
// that is too large is refused by the log's own size rule, with its own
// message.
const maxBodyInput = 2 * sdk.DefaultMaxRecord

func newEmitCommand(a *app) *cobra.Command {
	var thread, act, kind, body, bodyFile, actor string
	var expect uint64
	cmd := &cobra.Command{
		Use:   "emit --thread THREAD --act ACT --kind KIND (--body JSON | --body-file FILE) [flags]",
		Short: "Append one record to a thread",
		Long: `Append one record to a thread. The body is a JSON object, given inline
(--body) or read from a file (--body-file, "-" for standard input); it is
stored as canonical CBOR. Prints the new record's id and clock.

With --expect-clock N the append is conditional: it lands only while the
thread's newest record is at clock N (0: the thread has none); else
nothing is appended and it exits 1 naming the clock the thread is at.`,
		Example: `  spl emit --thread th_1 --act KNOW --kind agent.step --body '{"step": 1, "tool": "grep"}'
  echo '{"step": 2}' | spl emit --thread th_1 --act KNOW --kind agent.step --body-file -`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("body") == cmd.Flags().Changed("body-file") {
				return usagef("emit: give exactly one of --body and --body-file")
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("emit: %w", err)
			}
			data := []byte(body)
			if cmd.Flags().Changed("body-file") {
				if data, err = a.readBody(bodyFile); err != nil {
					return fmt.Errorf("emit: %w", err)
				}
			}
			cbor, err := records.BodyFromJSON(data)
			if err != nil {
				return fmt.Errorf("emit: %w", err)
			}
			now := time.Now()
			// Refuse bad input before the log is opened (see session save).
			if _, err := records.New(act, kind, thread, actor, now, records.RawBody(cbor)); err != nil {
				return fmt.Errorf("emit: %w", err)
			}

			return a.withClient(cmd, "emit", func(ctx context.Context, c *sdk.Client) error {
				ev := sdk.Event{Act: act, Kind: kind, Thread: thread, Actor: actor, Time: now, Body: records.RawBody(cbor)}
				var r sdk.Receipt
				if cmd.Flags().Changed("expect-clock") {
					rec, err := c.AppendEventIf(ctx, ev, expect)
					var tm *sdk.ThreadMovedError
					if errors.As(err, &tm) {
						return usagef("emit: --expect-clock %d: thread %q is at clock %d; nothing appended", expect, thread, tm.Current)
					}
					if err != nil {
						return fmt.Errorf("emit: %w", err)
					}
					r = sdk.Receipt{ID: rec.ID, Clock: rec.Clock}
				} else if r, err = c.Emit(ctx, ev); err != nil {
					return fmt.Errorf("emit: %w", err)
				}
				return a.writeReceipt(cmd, r, receiptJSON{Thread: thread, Act: act, Kind: kind, Actor: actor})
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread to append to (required)")
	f.StringVar(&act, "act", "", "upper-case verb: KNOW, LEARN, DO, SAY, ... (required)")
	f.StringVar(&kind, "kind", "", "lower-case dotted kind, e.g. agent.step (required)")
	f.StringVar(&body, "body", "", "body as a JSON object")
	f.StringVar(&bodyFile, "body-file", "", `read the JSON body from a file ("-": standard input)`)
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	f.Uint64Var(&expect, "expect-clock", 0, "append only while the thread's newest record is at this clock (0: the thread has none)")
	for _, name := range []string{"thread", "act", "kind"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// readBody reads a JSON body from a file, or from standard input for "-".
func (a *app) readBody(name string) ([]byte, error) {
	var r io.Reader = a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, &usageError{fmt.Sprintf("--body-file: %v", err)}
		}
		defer f.Close()
		r = f
	}
	if r == nil {
		return nil, usagef("--body-file -: no standard input")
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBodyInput+1))
	if err != nil {
		return nil, fmt.Errorf("--body-file %s: %w", name, err)
	}
	if len(data) > maxBodyInput {
		return nil, usagef("--body-file %s: more than %d bytes of JSON; a record holds at most %d bytes encoded",
			name, maxBodyInput, sdk.DefaultMaxRecord)
	}
	return data, nil
}
