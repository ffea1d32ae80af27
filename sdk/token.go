package sdk

import (
	"fmt"
	"os"
	"strings"

	"github.com/spl-dev/spl/env"
)

// NATSToken is the token to connect to a server with: the one in file
// when file is given (e.g. spl serve's DIR/token, or $SPL_TOKEN_FILE),
// else $SPL_TOKEN; "" for none. Open uses it with $SPL_SERVER, and the
// CLI with --server.
func NATSToken(file string) (string, error) {
	if file == "" {
		return env.Token(), nil
	}
	return ReadTokenFile(file)
}

// ReadTokenFile reads a secret from a file: its first line, without the
// spaces around it. A file with no token is an error.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", fmt.Errorf("%s holds no token", path)
	}
	return tok, nil
}
