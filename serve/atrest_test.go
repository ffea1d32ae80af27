package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/storekey"
	"github.com/spl-dev/spl/wire"
)

// The secrets of the at-rest tests: a body, a thread name (the thread
// index keeps thread names in its bucket), and a body over 1 MiB, which
// the log keeps outside its record, in a stream of bodies.
const (
	bodySecret   = "BODY-SECRET-3f9d0b-never-in-clear"
	threadSecret = "vault/THREAD-SECRET-a81c44"
	largeSecret  = "LARGE-BODY-SECRET-6e2a17"
)

// largeBody is a body kept outside its record.
var largeBody = strings.Repeat(largeSecret+" ", 64<<10) // 1.5 MiB

// writeSecret appends records and a checkpoint that hold the secrets, and
// reads them back through the read models, so that the thread index and
// the latest checkpoint are stored too.
func writeSecret(t *testing.T, s *Server) {
	t.Helper()
	b := base(s)
	for range 3 {
		if code := call(t, "POST", b+"/v1/records", emitBody(threadSecret, "DO", "agent.step", `{"note":"`+bodySecret+`"}`), nil); code != http.StatusCreated {
			t.Fatalf("emit: code=%d", code)
		}
	}
	if code := call(t, "POST", b+"/v1/records", emitBody(threadSecret, "KNOW", "agent.state", fmt.Sprintf(`{"messages":%q}`, largeBody)), nil); code != http.StatusCreated {
		t.Fatalf("large record: code=%d", code)
	}
	if code := call(t, "POST", b+"/v1/records", emitBody(threadSecret, "LEARN", records.KindCheckpoint, `{"summary":"`+bodySecret+`","learnings":["l"],"next_steps":["n"]}`), nil); code != http.StatusCreated {
		t.Fatalf("checkpoint: code=%d", code)
	}
	readSecret(t, s)
}

// readSecret reads what writeSecret wrote: every record, the index, the
// latest checkpoint.
func readSecret(t *testing.T, s *Server) {
	t.Helper()
	b := base(s)
	tp := url.PathEscape(threadSecret)
	var q queryResponse
	if code := call(t, "GET", b+"/v1/threads/"+tp+"/records", "", &q); code != http.StatusOK || len(q.Records) != 5 {
		t.Fatalf("records: code=%d, %d records, want 5", code, len(q.Records))
	}
	if !strings.Contains(string(q.Records[0].Body), bodySecret) {
		t.Fatalf("first body %s", q.Records[0].Body)
	}
	var large struct {
		Messages string `json:"messages"`
	}
	if err := json.Unmarshal(q.Records[3].Body, &large); err != nil || large.Messages != largeBody {
		t.Fatalf("large body read back: %d bytes (%v), want %d", len(large.Messages), err, len(largeBody))
	}
	var l threadsResponse
	if code := call(t, "GET", b+"/v1/threads", "", &l); code != http.StatusOK || threadNames(l.Threads) != threadSecret {
		t.Fatalf("threads: code=%d, %s", code, threadNames(l.Threads))
	}
	var cp wire.Checkpoint
	if code := call(t, "GET", b+"/v1/threads/"+tp+"/checkpoint", "", &cp); code != http.StatusOK || cp.Summary != bodySecret {
		t.Fatalf("checkpoint: code=%d, summary %q", code, cp.Summary)
	}
}

// stop shuts s down: its files are then all on disk.
func stop(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// holding lists the files under dir whose bytes hold secret.
func holding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(secret)) {
			found = append(found, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func keyFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "store.key")
	if err := storekey.Create(f); err != nil {
		t.Fatal(err)
	}
	return f
}

// startErr starts a server on cfg that must fail, and returns why.
func startErr(t *testing.T, cfg Config) error {
	t.Helper()
	cfg.Listen, cfg.HTTP = "127.0.0.1:0", "127.0.0.1:0"
	s, err := New(cfg, nil)
	if err != nil {
		return err
	}
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	stop(t, s)
	t.Fatalf("started on %+v", cfg)
	return nil
}

// TestServeEncryptedAtRest: spl serve with a key keeps no byte of a body
// or a thread name in the clear in any file of its data directory, with
// either cipher; without a key the same writes are found (the scan
// works). Restarted with its key it reads everything back; with the
// wrong key, or none, it does not start, and says why.
func TestServeEncryptedAtRest(t *testing.T) {
	t.Setenv("SPL_ENCRYPTION_KEY_FILE", "")
	for _, c := range []struct{ name, cipher string }{{"plain", ""}, {"chacha", ""}, {"aes", "aes-gcm"}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Dir: t.TempDir(), EncryptionCipher: c.cipher}
			if c.name != "plain" {
				cfg.EncryptionKeyFile = keyFile(t)
			}
			s := start(t, cfg)
			writeSecret(t, s)
			stop(t, s)
			body, thread, large := holding(t, cfg.Dir, bodySecret), holding(t, cfg.Dir, threadSecret), holding(t, cfg.Dir, largeSecret)
			if c.name == "plain" {
				// The log's block, the index's bucket for the thread, the
				// stream of bodies.
				if len(body) == 0 || len(thread) < 2 || len(large) == 0 {
					t.Fatalf("plain: the body is in %v, the thread in %v, the large body in %v; the scan finds nothing", body, thread, large)
				}
				return
			}
			if len(body)+len(thread)+len(large) > 0 {
				t.Fatalf("encrypted: the body is in %v, the thread in %v, the large body in %v", body, thread, large)
			}

			wrong := cfg
			wrong.EncryptionKeyFile = keyFile(t)
			if err := startErr(t, wrong); !errors.Is(err, storekey.ErrWrongKey) || !strings.Contains(err.Error(), wrong.EncryptionKeyFile) {
				t.Fatalf("wrong key: %v, want ErrWrongKey naming the file", err)
			}
			none := cfg
			none.EncryptionKeyFile, none.EncryptionCipher = "", ""
			if err := startErr(t, none); !errors.Is(err, storekey.ErrKeyRequired) || !strings.Contains(err.Error(), "--encryption-key-file") {
				t.Fatalf("no key: %v, want ErrKeyRequired naming the flag", err)
			}
			s = start(t, cfg)
			readSecret(t, s)
		})
	}
}

// TestServeEncryptionConfig: the encryption fields are checked in New,
// naming the field; a key file that is not one wraps storekey.ErrKeyFile.
func TestServeEncryptionConfig(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := keyFile(t)
	for _, c := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"short key", Config{Dir: "d", EncryptionKeyFile: short}, "EncryptionKeyFile"},
		{"bad cipher", Config{Dir: "d", EncryptionKeyFile: key, EncryptionCipher: "rot13"}, "EncryptionCipher"},
		{"cipher alone", Config{Dir: "d", EncryptionCipher: "aes-gcm"}, "EncryptionCipher"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg, nil)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("New: %v, want a *ConfigError on %s", err, c.field)
			}
			if c.name == "short key" && (!errors.Is(err, storekey.ErrKeyFile) || !strings.Contains(err.Error(), short)) {
				t.Fatalf("New: %v, want ErrKeyFile naming %s", err, short)
			}
		})
	}
	dir := t.TempDir()
	inside := filepath.Join(dir, "store.key")
	if err := storekey.Create(inside); err != nil {
		t.Fatal(err)
	}
	if err := startErr(t, Config{Dir: dir, EncryptionKeyFile: inside}); !errors.Is(err, storekey.ErrKeyInDir) {
		t.Fatalf("key inside the data directory: %v, want ErrKeyInDir", err)
	}
}
