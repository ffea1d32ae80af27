package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/storekey"
)

func newKeyCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Keys that encrypt a data directory at rest",
		Long: `A data directory's store can be encrypted at rest with a key file of
32 random bytes: SPL_ENCRYPTION_KEY_FILE=FILE for every command on the
embedded log, spl serve --encryption-key-file FILE. nats-server's
JetStream store encryption (ChaCha20-Poly1305, or AES-GCM) then covers the
log, the read models and the large payloads; a wrong or missing key is
refused at open. Keep the file outside the data directory and back it up
apart from it: without it nothing in the store can be read.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newKeyNewCommand(a))
	return cmd
}

type keyNewJSON struct {
	KeyFile string `json:"key_file"`
}

func newKeyNewCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "new FILE",
		Short: "Create a key that encrypts a data directory at rest",
		Long: `Write 32 random bytes to FILE, mode 0600. An existing file is never
replaced: what it encrypts would be lost with it. FILE may not lie inside
the data directory: a key beside the data it encrypts protects nothing.

Encrypt a new data directory with it by SPL_ENCRYPTION_KEY_FILE=FILE (and
spl serve --encryption-key-file FILE). A directory that already holds
data not encrypted is refused with a key: export its log and import it
into a new directory opened with the key (spl export, spl import); the
same way changes a key.`,
		Example: `  spl key new ~/.config/spl/store.key
  export SPL_ENCRYPTION_KEY_FILE=~/.config/spl/store.key`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			file := args[0]
			dir, err := a.dir()
			if err != nil {
				return fmt.Errorf("key new: %w", err)
			}
			if _, err := os.Stat(dir); err == nil {
				in, err := storekey.Inside(file, dir)
				if err != nil {
					return fmt.Errorf("key new: %w", err)
				}
				if in {
					return fmt.Errorf("key new: %w: %s is inside %s; keep the key elsewhere", storekey.ErrKeyInDir, file, dir)
				}
			}
			if err := storekey.Create(file); err != nil {
				return fmt.Errorf("key new: %w", err)
			}
			if a.json {
				return writeJSON(cmd.OutOrStdout(), keyNewJSON{KeyFile: file})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "key file  %s (%d random bytes, mode 0600)\n\n", file, storekey.Size)
			fmt.Fprintf(w, "Encrypt with it:  export %s=%s   (spl serve: --encryption-key-file %s)\n", env.EncryptionKeyFileVar, file, file)
			fmt.Fprintf(w, "Back it up apart from the data directory: without it the log cannot be read.\n")
			return nil
		}),
	}
}
