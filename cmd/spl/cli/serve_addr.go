package cli

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeAddrFile writes addr, the HTTP address spl serve listens on, to
// path (for --http-addr-file), through a temporary file renamed into
// place, so a reader never sees part of it. A client that started spl
// serve with --http 127.0.0.1:0 learns the port from it.
func writeAddrFile(path, addr string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".http-addr-*")
	if err != nil {
		return fmt.Errorf("serve: --http-addr-file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := fmt.Fprintln(tmp, addr); err != nil {
		tmp.Close()
		return fmt.Errorf("serve: --http-addr-file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("serve: --http-addr-file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("serve: --http-addr-file: %w", err)
	}
	return nil
}

// removeAddrFile removes the file of --http-addr-file on shutdown, so
// that no client reads the address of a server that has gone.
func removeAddrFile(path string) { _ = os.Remove(path) }
