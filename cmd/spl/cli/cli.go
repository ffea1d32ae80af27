// Package cli holds the cobra commands of the spl command. main only calls
// [Execute]; tests call [Run] with their own arguments, input and output.
//
// Every command opens at most one [sdk.Client] (lazily, the first time it
// needs storage) and Run closes it before it returns, so a process never
// exits with records still on their way to the log.
//
// Exit codes are part of the command's contract:
//
//	0  ok
//	1  usage or validation error (cobra usage errors, records.ErrInvalid, sdk.ErrNoActor, sdk.ErrNotErasable,
//	   sdk.ErrUnknownProjection, a key file that is not one: storekey.ErrKeyFile, ErrKeyInDir), or a read model
//	   that did not catch up in time (sdk.ErrProjectionBehind)
//	2  not found (sdk.ErrNotFound)
//	3  storage error (anything else)
//	4  verification failed (records.ErrCorrupt; verify: corrupt or missing records, bad signatures, a loss,
//	   unsigned records under --require-signed), or a run checkpoint that
//	   cannot be resumed from (sdk.ErrCheckpointCorrupt)
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/storekey"
)

// Exit codes of the spl command.
const (
	ExitOK       = 0 // success
	ExitUsage    = 1 // usage or validation error; a read model that did not catch up
	ExitNotFound = 2 // nothing matched
	ExitStorage  = 3 // the log could not be opened, read or written
	ExitCorrupt  = 4 // verification failed
)

// DefaultTimeout bounds the storage operations of one command (--timeout).
const DefaultTimeout = 30 * time.Second

// Execute runs spl with the process's arguments and standard streams, under
// a context cancelled on SIGINT and SIGTERM, and returns the exit code once
// the client is closed.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the command winds down and closes its
		// client; a second one kills the process the default way.
		<-ctx.Done()
		stop()
	}()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs spl with args (without the program name) and returns the exit
// code. An error is written once to stderr as "spl: <message>". The client
// the command opened, if any, is closed before Run returns.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin}
	root := newRootCommand(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)

	cmd, err := root.ExecuteContextC(ctx)
	if cerr := a.close(); cerr != nil && err == nil {
		err = &runError{fmt.Errorf("close: %w", cerr)}
	}
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	msg := explain(err, a.timeout)
	var re *runError
	if !errors.As(err, &re) {
		// cobra refused the command line itself: name the command, and
		// point at its help.
		if name := commandName(cmd); name != "" && !strings.HasPrefix(msg, name+":") {
			msg = name + ": " + msg
		}
		defer fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	fmt.Fprintf(stderr, "spl: %s\n", msg)
	return code
}

// commandName is the path of cmd below the root: "session save".
func commandName(cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// app is the state one run of spl shares between its commands: the global
// flags and the client opened for them.
type app struct {
	stdin io.Reader

	home    string        // --home
	json    bool          // --json
	timeout time.Duration // --timeout

	server     string // --server: a NATS URL; empty for the embedded log
	creds      string // --creds: NATS credentials file
	tokenFile  string // --token-file: file holding the NATS token
	nkeySeed   string // --nkey-seed: NATS nkey seed file
	serverCA   string // --server-ca: CA of the server's TLS certificate
	serverCert string // --server-cert, --server-key: client certificate
	serverKey  string

	keyFile string // --key-file: the actor's signing key (actor.go)

	client *sdk.Client
}

// dir returns the data directory: --home, else $SPL_HOME, else ~/.spl.
func (a *app) dir() (string, error) {
	if a.home != "" {
		return a.home, nil
	}
	d, err := env.Home()
	if err != nil {
		return "", fmt.Errorf("data directory: set --home or SPL_HOME: %w", err)
	}
	return d, nil
}

// open opens the client of this run, once: the server of --server (or
// SPL_SERVER), else the embedded log of the data directory.
func (a *app) open(ctx context.Context) (*sdk.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if a.server == "" {
		// Read here, not as the flag's default, which --help would
		// print with any token in it.
		a.server = env.Server()
	}
	if a.server != "" {
		opts, err := a.natsOptions()
		if err != nil {
			return nil, err
		}
		sopts, err := a.signOptions()
		if err != nil {
			return nil, err
		}
		c, err := sdk.Connect(ctx, a.server, append(sopts, sdk.WithNATSOptions(opts...))...)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", sdk.RedactURL(a.server), err)
		}
		a.client = c
		return c, nil
	}
	dir, err := a.dir()
	if err != nil {
		return nil, err
	}
	sopts, err := a.signOptions()
	if err != nil {
		return nil, err
	}
	c, err := sdk.Open(ctx, append(sopts, sdk.WithDir(dir))...)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	a.client = c
	return c, nil
}

// natsOptions turns the connection flags into nats.go's own options.
func (a *app) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if a.creds != "" {
		opts = append(opts, nats.UserCredentials(a.creds))
	}
	tok, err := sdk.NATSToken(a.tokenFile)
	if err != nil {
		return nil, usagef("--token-file: %v", err)
	}
	if tok != "" {
		opts = append(opts, nats.Token(tok))
	}
	if a.nkeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(a.nkeySeed)
		if err != nil {
			return nil, usagef("--nkey-seed: %v", err)
		}
		opts = append(opts, o)
	}
	if a.serverCA != "" {
		opts = append(opts, nats.RootCAs(a.serverCA))
	}
	if (a.serverCert == "") != (a.serverKey == "") {
		return nil, usagef("--server-cert and --server-key go together")
	}
	if a.serverCert != "" {
		opts = append(opts, nats.ClientCert(a.serverCert, a.serverKey))
	}
	return opts, nil
}

// close closes the client of this run, if one was opened.
func (a *app) close() error {
	if a.client == nil {
		return nil
	}
	c := a.client
	a.client = nil
	return c.Close()
}

// storageContext bounds the storage operations of a command by --timeout.
func (a *app) storageContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

// withClient opens the client of this run under --timeout and calls f with
// it and that bounded context. An error opening the client is wrapped with
// op, the command's name ("session save"); f's own errors are returned as
// they are. Run closes the client, not withClient.
func (a *app) withClient(cmd *cobra.Command, op string, f func(ctx context.Context, c *sdk.Client) error) error {
	ctx, cancel := a.storageContext(cmd)
	defer cancel()
	c, err := a.open(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return f(ctx, c)
}

// usageError is a command line that parsed but does not make sense (a
// missing flag, two flags that exclude each other). Exit code 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// runError marks an error returned by a command's RunE, as opposed to one
// cobra returned while parsing the command line (always a usage error).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// run adapts a command body so that its errors are marked as runErrors.
func run(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return &runError{err}
		}
		return nil
	}
}

// exitCode maps an error to the exit code documented in the root help.
func exitCode(err error) int {
	var ue *usageError
	var re *runError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue), errors.Is(err, records.ErrInvalid), errors.Is(err, sdk.ErrNoActor),
		errors.Is(err, sdk.ErrNotErasable), errors.Is(err, sdk.ErrUnknownProjection),
		errors.Is(err, sdk.ErrProjectionBehind), errors.Is(err, sdk.ErrRunFinished), errors.Is(err, sdk.ErrNotWaiting),
		errors.Is(err, sdk.ErrSessionCompleted), errors.Is(err, sdk.ErrNotResumable), errors.Is(err, sdk.ErrNoResumePoint),
		errors.Is(err, storekey.ErrKeyFile), errors.Is(err, storekey.ErrKeyInDir):
		return ExitUsage
	case errors.Is(err, sdk.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, errDamaged), errors.Is(err, records.ErrCorrupt), errors.Is(err, sdk.ErrCheckpointCorrupt),
		errors.Is(err, sdk.ErrLoss):
		return ExitCorrupt
	case !errors.As(err, &re):
		return ExitUsage // cobra: unknown command or flag, wrong number of arguments
	default:
		return ExitStorage
	}
}

// explain adds a hint to errors whose cause is not obvious from the text.
func explain(err error, timeout time.Duration) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%v (gave up after --timeout %v)", err, timeout)
	case errors.Is(err, sdk.ErrNoActor):
		return fmt.Sprintf("%v: set --actor or SPL_ACTOR", err)
	}
	return err.Error()
}

const rootLong = `spl is an append-only, content-addressed record log for AI agents.

Agents emit immutable records to threads; a session checkpoint is one kind
of record. The log lives in NATS JetStream, embedded in this process: the
first spl process on a data directory runs the server, the others join it.

Environment:
  SPL_HOME   data directory (default ~/.spl); --home overrides it
  SPL_SERVER NATS URL of an spl server (spl serve) to use instead of the
             embedded log; --server overrides it
  SPL_TOKEN_FILE, SPL_TOKEN
             the server's token, in a file or the variable (never on the
             command line, where ps shows it); --token-file overrides them
  SPL_ACTOR  actor (a DID, e.g. did:sync:agent:dev) of the records you
             write; --actor overrides it
  SPL_ACTOR_KEY  the key file that signs them (spl actor new); --key-file
             overrides it
  SPL_ENCRYPTION_KEY_FILE
             the key file the data directory's store is encrypted at
             rest with (spl key new); every process on the directory
             needs it

Output:
  --json prints one JSON object or array on stdout, with the fields id,
  clock, thread, act, kind, actor, time (RFC 3339, UTC, milliseconds:
  2026-11-21T23:46:52.100Z), ts (Unix ms),
  prev, body, and for checkpoints summary, learnings, next_steps, name,
  session_id. Errors go to stderr as "spl: <message>".

Exit codes:
  0  ok
  1  usage or validation error (bad flag, invalid record, no actor, a
     refused erasure, an encryption key file that is not one), or a read
     model did not catch up within --timeout
  2  not found (e.g. a thread with no checkpoint)
  3  storage error (the log could not be opened, read or written; a wrong
     or missing encryption key)
  4  verification failed (corrupt or missing records, bad signatures, a
     loss, unsigned records under --require-signed), or a run checkpoint
     that cannot be resumed from`

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "spl",
		Short:         "An append-only record log for AI agents",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionText(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if a.timeout <= 0 {
				return usagef("--timeout must be positive, got %v", a.timeout)
			}
			return nil
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true

	f := root.PersistentFlags()
	f.StringVar(&a.home, "home", "", "data directory (default $SPL_HOME, else ~/.spl)")
	f.BoolVar(&a.json, "json", false, "print machine-readable JSON on stdout")
	f.DurationVar(&a.timeout, "timeout", DefaultTimeout, "give up on storage operations after this long")
	f.StringVar(&a.server, "server", "", "NATS URL of an spl server (default $SPL_SERVER; none: the embedded log)")
	f.StringVar(&a.creds, "creds", env.Creds(), "NATS credentials file for --server (default $SPL_CREDS)")
	f.StringVar(&a.tokenFile, "token-file", env.TokenFile(), "file holding the NATS token for --server, e.g. spl serve's DIR/token (default $SPL_TOKEN_FILE; or the token in $SPL_TOKEN)")
	f.StringVar(&a.nkeySeed, "nkey-seed", "", "NATS nkey seed file for --server")
	f.StringVar(&a.serverCA, "server-ca", "", "CA of the server's TLS certificate (tls:// URLs)")
	f.StringVar(&a.serverCert, "server-cert", "", "client TLS certificate for --server")
	f.StringVar(&a.serverKey, "server-key", "", "client TLS key for --server")
	f.StringVar(&a.keyFile, "key-file", env.ActorKey(), "Ed25519 key that signs the records you write (spl actor new; default $SPL_ACTOR_KEY; none: unsigned)")

	root.AddCommand(newSessionCommand(a), newEmitCommand(a), newThreadCommand(a),
		newRecordCommand(a), newEraseCommand(a), newVerifyCommand(a), newRetentionCommand(a),
		newProjectionsCommand(a), newServeCommand(a), newActorCommand(a), newKeyCommand(a))
	root.AddCommand(newRunCommand(a), newMCPCommand(a), newPromptCommand(), newVersionCommand(), newManCommand())
	root.AddCommand(newExportCommand(a), newImportCommand(a))
	root.SetVersionTemplate("{{.Version}}")
	return root
}

// groupRunE is the body of a command that only groups others: without
// arguments it prints its help, with any it fails as a usage error (cobra
// would print the help and succeed).
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}

// actorFlag resolves --actor: the flag, else $SPL_ACTOR.
func actorFlag(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if actor := env.Actor(); actor != "" {
		return actor, nil
	}
	return "", usagef("no actor: pass --actor or set SPL_ACTOR to a DID such as did:sync:agent:dev")
}
