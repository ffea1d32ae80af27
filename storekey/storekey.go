// Package storekey is the key that encrypts a data directory's store at
// rest: a file of exactly [Size] random bytes, mode 0600, made by
//
//	spl key new FILE
//	head -c 32 /dev/urandom > FILE && chmod 600 FILE
//
// and named by spl serve --encryption-key-file FILE or, for every process
// on the embedded default, SPL_ENCRYPTION_KEY_FILE=FILE. The file is the
// key itself: whoever reads it and the data directory reads every record.
// It is kept outside the data directory (a key beside the data it
// encrypts protects nothing, and spl refuses one inside) and backed up
// apart from it: without it the store cannot be read.
//
// The bytes are never handed on as they are. The engine (nats-server's
// JetStream store encryption) gets [Key.ServerKey], their hex form, from
// which it derives a key per stream and per message block. The data
// directory's marker of an encrypted store holds [Key.Check], a value
// derived one way from them, so that a wrong key is refused at open,
// before the engine could try it on the store.
//
// The errors of a store opened with the wrong key, without its key, or
// with a key when it is not encrypted are the sentinels below, for
// errors.Is; the open path wraps them with the directory and the file.
//
// storekey imports only the standard library.
package storekey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Size is the size of a key file, in bytes: the key of a 256-bit cipher.
const Size = 32

var (
	// ErrKeyFile reports a key file that is not one: not exactly Size
	// bytes, all zeros, or readable by others.
	ErrKeyFile = errors.New("spl/storekey: bad encryption key file")
	// ErrKeyRequired reports an encrypted store opened without a key.
	ErrKeyRequired = errors.New("spl/storekey: encryption key required")
	// ErrWrongKey reports an encrypted store opened with a key it was not
	// encrypted with.
	ErrWrongKey = errors.New("spl/storekey: wrong encryption key")
	// ErrNotEncrypted reports a key given for a store that holds data not
	// encrypted, or for a server that does not encrypt.
	ErrNotEncrypted = errors.New("spl/storekey: store not encrypted")
	// ErrKeyInDir reports a key file inside the data directory it would
	// encrypt.
	ErrKeyInDir = errors.New("spl/storekey: encryption key file inside the data directory")
)

// Key is an encryption key read from its file.
type Key struct {
	// Name says where the key came from, for messages: its file, or the
	// flag or variable that named it ("SPL_ENCRYPTION_KEY_FILE=/k/spl").
	Name string
	// File is the key file.
	File string

	b [Size]byte
}

// String is k's Name: a key printed never shows its bytes.
func (k *Key) String() string { return k.Name }

// Load reads the key in file. The file must hold exactly Size bytes, not
// all zeros (what a power loss can leave of a new file), and be readable
// by its owner alone. The key's Name is file.
func Load(file string) (*Key, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrKeyFile, file)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s: mode %v lets others read it; chmod 600 %s", ErrKeyFile, file, fi.Mode().Perm(), file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(b) != Size {
		return nil, fmt.Errorf("%w: %s holds %d bytes; a key file is exactly %d random bytes, not text (spl key new FILE makes one)", ErrKeyFile, file, len(b), Size)
	}
	k := &Key{Name: file, File: file}
	copy(k.b[:], b)
	if k.b == ([Size]byte{}) {
		return nil, fmt.Errorf("%w: %s holds only zero bytes; a key file is %d random bytes (spl key new FILE makes one)", ErrKeyFile, file, Size)
	}
	return k, nil
}

// Create writes a new key of Size random bytes to file, mode 0600, and
// syncs it. It never replaces a file (the error then wraps fs.ErrExist):
// the store a key encrypts is lost with it.
func Create(file string) error {
	var b [Size]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("spl/storekey: new key: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("spl/storekey: new key: %w (a key file is never replaced: what it encrypts would be lost with it)", err)
	}
	_, werr := f.Write(b[:])
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(file)
		return fmt.Errorf("spl/storekey: new key %s: %w", file, err)
	}
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		_ = d.Sync() // the name too, where the directory can be synced
		d.Close()
	}
	return nil
}

// ServerKey is the form of k that nats-server takes as its JetStream key
// (jetstream.key in its configuration): the key's bytes in hex. The store
// is nats-server's own: a nats-server given this key opens it.
func (k *Key) ServerKey() string { return hex.EncodeToString(k.b[:]) }

// checkContext separates Check from every other use of the key.
const checkContext = "spl/storekey: key check v1"

// Check is a value derived one way from k (HMAC-SHA256 of a fixed
// context, hex): it tells whether a key is the one a store was encrypted
// with, and nothing of the key.
func (k *Key) Check() string {
	h := hmac.New(sha256.New, k.b[:])
	h.Write([]byte(checkContext))
	return hex.EncodeToString(h.Sum(nil))
}

// Opens reports whether k is the key whose Check is check.
func (k *Key) Opens(check string) bool {
	return hmac.Equal([]byte(k.Check()), []byte(check))
}

// Inside reports whether k's file lies inside dir (Inside).
func (k *Key) Inside(dir string) (bool, error) { return Inside(k.File, dir) }

// Inside reports whether file lies inside dir, symbolic links resolved:
// a key file there would be read with the data it encrypts. The file need
// not exist yet; its directory must.
func Inside(file, dir string) (bool, error) {
	f, err := filepath.Abs(file)
	if err != nil {
		return false, err
	}
	parent, err := resolve(filepath.Dir(f))
	if err != nil {
		return false, err
	}
	f = filepath.Join(parent, filepath.Base(f))
	if r, err := filepath.EvalSymlinks(f); err == nil {
		f = r // the file itself may be a link
	}
	d, err := resolve(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(d, f)
	if err != nil {
		return false, nil
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)), nil
}

func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
