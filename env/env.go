// Package env reads the environment variables spl is configured by, in
// one place: the spl command, the SDK and the log call it rather than
// os.Getenv, so that each variable has one name, one default and one
// documented meaning.
//
//	variable                 read by            meaning (default)
//	SPL_HOME                 Home               data directory of the embedded log (~/.spl)
//	SPL_ACTOR                Actor              actor DID of records emitted without one (none)
//	SPL_ACTOR_KEY            ActorKey           file of the Ed25519 key that signs records (none: unsigned)
//	SPL_SERVER               Server             NATS URL of an spl server to use instead of the embedded log (none)
//	SPL_CREDS                Creds              NATS credentials file for SPL_SERVER or --server (none)
//	SPL_TOKEN                Token              NATS token for SPL_SERVER or --server (none)
//	SPL_TOKEN_FILE           TokenFile          file holding that token, e.g. spl serve's DIR/token (none)
//	SPL_SERVE_TOKEN          ServeToken         token spl serve requires from clients (none)
//	SPL_SERVE_PASSWORD       ServePassword      password of spl serve's --user (none)
//	SPL_ENCRYPTION_KEY_FILE  EncryptionKeyFile  key file the store is encrypted at rest with (none: not encrypted)
//
// A flag of the spl command, or an option of the SDK, overrides the
// variable it names. A variable set to "" is the same as one not set.
// The benchmark harness (bench/) has variables of its own.
//
// env imports only the standard library.
package env

import (
	"fmt"
	"os"
	"path/filepath"
)

// The names of the variables.
const (
	HomeVar          = "SPL_HOME"
	ActorVar         = "SPL_ACTOR"
	ActorKeyVar      = "SPL_ACTOR_KEY"
	ServerVar        = "SPL_SERVER"
	CredsVar         = "SPL_CREDS"
	TokenVar         = "SPL_TOKEN"
	TokenFileVar     = "SPL_TOKEN_FILE"
	ServeTokenVar    = "SPL_SERVE_TOKEN"
	ServePasswordVar = "SPL_SERVE_PASSWORD"

	EncryptionKeyFileVar = "SPL_ENCRYPTION_KEY_FILE"
)

// Home returns the data directory of the embedded log: $SPL_HOME, else
// .spl in the user's home directory. It fails only when SPL_HOME is not
// set and there is no home directory.
func Home() (string, error) {
	if d := os.Getenv(HomeVar); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("spl/env: no %s and no home directory: %w", HomeVar, err)
	}
	return filepath.Join(home, ".spl"), nil
}

// Actor returns $SPL_ACTOR: the actor (a DID such as did:sync:agent:dev)
// of records emitted without one; "" when not set.
func Actor() string { return os.Getenv(ActorVar) }

// ActorKey returns $SPL_ACTOR_KEY: the file of the Ed25519 private key
// (PKCS #8 PEM, as spl actor new writes it) that signs the records the
// SDK and the spl command write; "" when not set.
func ActorKey() string { return os.Getenv(ActorKeyVar) }

// Server returns $SPL_SERVER: the NATS URL of an spl server (spl serve) to
// use instead of the embedded log; "" when not set.
func Server() string { return os.Getenv(ServerVar) }

// Creds returns $SPL_CREDS: the NATS credentials file to connect to the
// server with; "" when not set.
func Creds() string { return os.Getenv(CredsVar) }

// Token returns $SPL_TOKEN: the NATS token to connect to the server with
// (a secret: the environment keeps it out of ps, a URL or a flag would
// not); "" when not set.
func Token() string { return os.Getenv(TokenVar) }

// TokenFile returns $SPL_TOKEN_FILE: a file holding the NATS token to
// connect to the server with; "" when not set.
func TokenFile() string { return os.Getenv(TokenFileVar) }

// ServeToken returns $SPL_SERVE_TOKEN: the token spl serve requires from
// clients; "" when not set.
func ServeToken() string { return os.Getenv(ServeTokenVar) }

// ServePassword returns $SPL_SERVE_PASSWORD: the password spl serve
// requires of its --user; "" when not set.
func ServePassword() string { return os.Getenv(ServePasswordVar) }

// EncryptionKeyFile returns $SPL_ENCRYPTION_KEY_FILE: the key file (32
// random bytes, see package storekey) that the store of the data
// directory is encrypted at rest with, for every process that opens the
// embedded log and for spl serve; "" when not set (not encrypted).
func EncryptionKeyFile() string { return os.Getenv(EncryptionKeyFileVar) }
