package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// signOptions returns the client options of --key-file: its key signs
// every record this run writes.
func (a *app) signOptions() ([]sdk.Option, error) {
	if a.keyFile == "" {
		return nil, nil
	}
	key, err := sdk.ReadKeyFile(a.keyFile)
	if err != nil {
		return nil, err
	}
	return []sdk.Option{sdk.WithSigningKey(key)}, nil
}

func newActorCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "actor",
		Short: "Keys that prove who wrote a record",
		Long: `An actor signs its records with an Ed25519 key. An actor that is a
did:key (did:key:z6Mk…) is its own key. Any other DID, such as
did:sync:agent:dev, holds the key an administrator bound to it with
spl actor bind: a core.actor.key record on the thread spl/actors.

spl verify checks every signature against the key the record's actor
held at the record's clock; spl serve --require-signed refuses records
that are unsigned or signed by a key not their actor's.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newActorNewCommand(a), newActorBindCommand(a), newActorListCommand(a))
	return cmd
}

type actorNewJSON struct {
	KeyFile string `json:"key_file"`
	DIDKey  string `json:"did_key"`
	DID     string `json:"did,omitempty"`
}

func newActorNewCommand(a *app) *cobra.Command {
	var did, out string
	cmd := &cobra.Command{
		Use:   "new [--did DID] [--out FILE]",
		Short: "Create a signing key",
		Long: `Create an Ed25519 key, write it to FILE (default DIR/actor.key in the
data directory; PKCS #8 PEM, mode 0600; an existing file is never
replaced) and print its did:key.

Sign with it by --key-file FILE or SPL_ACTOR_KEY=FILE: as the actor
did:key:… itself, with no binding, or, with --did DID, as DID once an
administrator has bound the key to it (the command to run is printed).`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if did != "" {
				if err := records.CheckActorDID(did); err != nil {
					return fmt.Errorf("actor new: %w", err)
				}
			}
			if out == "" {
				dir, err := a.dir()
				if err != nil {
					return fmt.Errorf("actor new: %w", err)
				}
				out = filepath.Join(dir, sdk.ActorKeyFile)
			}
			key, didKey, err := sdk.GenerateKey()
			if err != nil {
				return fmt.Errorf("actor new: %w", err)
			}
			if err := sdk.WriteKeyFile(out, key); err != nil {
				return fmt.Errorf("actor new: %w", err)
			}
			if a.json {
				return writeJSON(cmd.OutOrStdout(), actorNewJSON{KeyFile: out, DIDKey: didKey, DID: did})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "key file  %s (mode 0600)\n", out)
			fmt.Fprintf(w, "did:key   %s\n\n", didKey)
			fmt.Fprintf(w, "Sign with it:  export SPL_ACTOR_KEY=%s   (or --key-file %s)\n", out, out)
			if did == "" {
				fmt.Fprintf(w, "Write as the key itself:  --actor %s\n", didKey)
				return nil
			}
			fmt.Fprintf(w, "Write as %s once an administrator has run:\n  spl actor bind %s --key %s\n", did, did, didKey)
			return nil
		}),
	}
	cmd.Flags().StringVar(&did, "did", "", "the DID the key is for (prints the spl actor bind command)")
	cmd.Flags().StringVar(&out, "out", "", "key file to write (default DIR/actor.key)")
	return cmd
}

func newActorBindCommand(a *app) *cobra.Command {
	var key, admin string
	var revoke bool
	cmd := &cobra.Command{
		Use:   "bind DID (--key did:key:… | --revoke)",
		Short: "Bind an actor to a key (an administrator's act)",
		Long: `Write a core.actor.key record on spl/actors: from its clock on, the
records of DID must be signed by the key of --key (a did:key), or, with
--revoke, DID holds no key. The newest binding of an actor wins.

Binding is an administrator's act. On the embedded log the owner of the
data directory binds. Against spl serve it takes the server's admin
token (DIR/admin-token: --server nats://HOST:PORT --token-file
DIR/admin-token); its write token is refused. Audit spl/actors (spl
actor list, spl thread show spl/actors). --actor names the
administrator (default $SPL_ACTOR).`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if (key == "") == !revoke {
				return usagef("actor bind: give --key did:key:… or --revoke")
			}
			actor, err := actorFlag(admin)
			if err != nil {
				return err
			}
			return a.withClient(cmd, "actor bind", func(ctx context.Context, c *sdk.Client) error {
				r, err := c.BindActorKey(ctx, actor, args[0], key, revoke)
				if errors.Is(err, sdk.ErrForbidden) {
					return fmt.Errorf("actor bind: %w (a server binds keys for its admin token only: --token-file DIR/admin-token)", err)
				}
				if err != nil {
					return fmt.Errorf("actor bind: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), receiptRef{ID: r.ID.String(), Clock: r.Clock})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", r.ID, r.Clock)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&key, "key", "", "the did:key of the actor's key")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "withdraw the actor's key")
	cmd.Flags().StringVar(&admin, "actor", "", "the administrator writing the binding (default $SPL_ACTOR)")
	return cmd
}

type actorJSON struct {
	Actor   string `json:"actor"`
	Key     string `json:"key,omitempty"`
	Revoked bool   `json:"revoked,omitempty"`
	Clock   uint64 `json:"clock"`
	ID      string `json:"id"`
}

func newActorListCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List actors and the keys bound to them",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "actor list", func(ctx context.Context, c *sdk.Client) error {
				bs, err := c.ActorKeys(ctx)
				if bs == nil && err != nil {
					return fmt.Errorf("actor list: %w", err)
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "spl: actor list: bindings ignored: %v\n", err)
				}
				if a.json {
					out := []actorJSON{}
					for _, b := range bs {
						out = append(out, actorJSON{Actor: b.Actor, Key: b.Key, Revoked: b.Revoked, Clock: b.Clock, ID: b.ID.String()})
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "ACTOR\tKEY\tCLOCK\tBINDING")
				for _, b := range bs {
					key := b.Key
					if b.Revoked {
						key = "(revoked)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", b.Actor, key, b.Clock, b.ID)
				}
				return tw.Flush()
			})
		}),
	}
}
