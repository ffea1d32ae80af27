package natsio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// TokenFile is the name of the data directory's token: the embedded
// server requires it from every client, and spl serve, unless configured
// with credentials of its own, requires it from NATS clients and from
// HTTP clients that write.
const TokenFile = tokenFile

// Secret returns the secret kept in the file name of the data directory
// dir (mode 0600, 48 hex digits), creating it on first use the way the
// token is (written whole, never seen partial), and whether this call
// created it. The directory is checked first (OpenDir).
func Secret(dir, name string) (secret string, created bool, err error) {
	if err := OpenDir(dir); err != nil {
		return "", false, err
	}
	path := filepath.Join(dir, name)
	_, err = os.Stat(path)
	created = errors.Is(err, fs.ErrNotExist)
	secret, err = loadToken(path)
	return secret, created && err == nil, err
}
