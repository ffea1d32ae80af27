package natsio

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/storekey"
)

func TestPlanStore(t *testing.T) {
	dir := t.TempDir()
	key, other := newKey(t, dir, "key"), newKey(t, dir, "other")
	marker := &encryptionInfo{Cipher: CipherChaCha, Check: key.Check()}
	enc := []string{"$G > spl"}
	for _, c := range []struct {
		name string
		st   storeState
		enc  Encryption
		want storePlan
		err  error
	}{
		{"plain, no key", storeState{plain: enc}, Encryption{}, storePlan{}, nil},
		{"empty, no key", storeState{}, Encryption{}, storePlan{}, nil},
		{"marker, no key", storeState{marker: marker}, Encryption{}, storePlan{}, storekey.ErrKeyRequired},
		{"encrypted streams, no key", storeState{encrypted: enc}, Encryption{}, storePlan{}, storekey.ErrKeyRequired},
		{"empty, key", storeState{}, Encryption{Key: key}, storePlan{cipher: CipherChaCha, newMarker: true}, nil},
		{"empty, key, aes", storeState{}, Encryption{Key: key, Cipher: CipherAES}, storePlan{cipher: CipherAES, newMarker: true}, nil},
		{"plain, key", storeState{plain: enc}, Encryption{Key: key}, storePlan{}, storekey.ErrNotEncrypted},
		{"marker, key", storeState{marker: marker, encrypted: enc}, Encryption{Key: key}, storePlan{cipher: CipherChaCha}, nil},
		{"marker, wrong key", storeState{marker: marker, encrypted: enc}, Encryption{Key: other}, storePlan{}, storekey.ErrWrongKey},
		{"marker lost, key", storeState{encrypted: enc}, Encryption{Key: key}, storePlan{cipher: CipherChaCha, rewrite: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := planStore(c.st, c.enc)
			if !errors.Is(err, c.err) || (err != nil) != (c.err != nil) {
				t.Fatalf("err=%v, want %v", err, c.err)
			}
			if got != c.want {
				t.Fatalf("plan=%+v, want %+v", got, c.want)
			}
		})
	}
}

// A store keeps the cipher it was encrypted with: another one is a
// conversion nats-server would do block by block in place.
func TestPlanStoreCipher(t *testing.T) {
	key := newKey(t, t.TempDir(), "key")
	st := storeState{marker: &encryptionInfo{Cipher: CipherChaCha, Check: key.Check()}, encrypted: []string{"$G > spl"}}
	if _, err := planStore(st, Encryption{Key: key, Cipher: CipherAES}); err == nil || !strings.Contains(err.Error(), "export") {
		t.Fatalf("err=%v, want a refusal that says to export", err)
	}
}

// newKey makes a key file in dir.
func newKey(t *testing.T, dir, name string) *storekey.Key {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := storekey.Create(file); err != nil {
		t.Fatal(err)
	}
	k, err := storekey.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// secret is written to every kind of bucket spl keeps; the scan looks for
// it in the files of the data directory.
const secret = "SECRET-BODY-7c1e9a-do-not-store-in-clear"

// writeSecrets stores secret in a stream, a KV bucket and an object
// store, as the log, the read models and large payloads do.
func writeSecrets(t *testing.T, c *Conn) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "rec", Subjects: []string{"rec.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.JS.Publish(ctx, "rec."+secret, []byte(secret+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "models"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "latest", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	obj, err := c.JS.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "blobs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.PutBytes(ctx, "payload", bytes.Repeat([]byte(secret), 1000)); err != nil {
		t.Fatal(err)
	}
}

// checkSecrets reads back what writeSecrets stored.
func checkSecrets(t *testing.T, c *Conn) {
	t.Helper()
	ctx := context.Background()
	s, err := c.JS.Stream(ctx, "rec")
	if err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	if m, err := s.GetMsg(ctx, 1); err != nil || string(m.Data) != secret+"a" {
		t.Fatalf("first message: %v, %v", m, err)
	}
	kv, err := c.JS.KeyValue(ctx, "models")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "latest"); err != nil || string(e.Value()) != secret {
		t.Fatalf("kv: %v, %v", e, err)
	}
	obj, err := c.JS.ObjectStore(ctx, "blobs")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := obj.GetBytes(ctx, "payload"); err != nil || !bytes.Equal(b, bytes.Repeat([]byte(secret), 1000)) {
		t.Fatalf("object: %d bytes, %v", len(b), err)
	}
}

// filesHolding lists the files under dir whose bytes hold s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			found = append(found, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func dialKey(t *testing.T, dir, keyFile string) (*Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Dial(ctx, Options{Dir: dir, KeyFile: keyFile, Linger: time.Millisecond, Name: "atrest-test"})
}

func mustDial(t *testing.T, dir, keyFile string) *Conn {
	t.Helper()
	c, err := dialKey(t, dir, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEncryptedAtRest: what a stream, a KV bucket and an object store
// hold is nowhere in the files of an encrypted data directory, and is in
// them without encryption (so the scan would find it).
func TestEncryptedAtRest(t *testing.T) {
	t.Setenv(env.EncryptionKeyFileVar, "")
	keys := t.TempDir()
	for _, c := range []struct {
		name    string
		keyFile string
	}{
		{"plain", ""},
		{"chacha", newKey(t, keys, "k").File},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "spl")
			conn := mustDial(t, dir, c.keyFile)
			writeSecrets(t, conn)
			conn.Close()
			found := filesHolding(t, dir, secret)
			if c.keyFile == "" {
				if len(found) < 3 {
					t.Fatalf("plain store: the secret is in %v, want the stream, the bucket and the object store", found)
				}
				return
			}
			if len(found) > 0 {
				t.Fatalf("encrypted store: the secret is in %v", found)
			}
			if _, err := os.Stat(filepath.Join(dir, encryptionFile)); err != nil {
				t.Fatalf("no marker: %v", err)
			}
			conn = mustDial(t, dir, c.keyFile)
			defer conn.Close()
			checkSecrets(t, conn)
		})
	}
}

// TestWrongKey: an encrypted store opened with the wrong key, or without
// one, fails at open with the sentinel, naming the key, and is intact
// when opened with its own. So does one whose marker was lost, found by
// the check after the start; a plaintext store opened with a key is
// refused and left as it was.
func TestWrongKey(t *testing.T) {
	t.Setenv(env.EncryptionKeyFileVar, "")
	keys := t.TempDir()
	right, wrong := newKey(t, keys, "right").File, newKey(t, keys, "wrong").File
	dir := filepath.Join(t.TempDir(), "spl")
	conn := mustDial(t, dir, right)
	writeSecrets(t, conn)
	conn.Close()

	refused := func(t *testing.T, keyFile string, want error, says string) {
		t.Helper()
		c, err := dialKey(t, dir, keyFile)
		if err == nil {
			c.Close()
			t.Fatalf("opened with key %q", keyFile)
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), says) {
			t.Fatalf("open with key %q: %v, want %v naming %q", keyFile, err, want, says)
		}
	}
	refused(t, wrong, storekey.ErrWrongKey, wrong)
	refused(t, "", storekey.ErrKeyRequired, env.EncryptionKeyFileVar)
	t.Setenv(env.EncryptionKeyFileVar, wrong)
	refused(t, "", storekey.ErrWrongKey, env.EncryptionKeyFileVar+"="+wrong)
	t.Setenv(env.EncryptionKeyFileVar, right)
	conn = mustDial(t, dir, "") // the variable's key
	checkSecrets(t, conn)
	conn.Close()
	t.Setenv(env.EncryptionKeyFileVar, "")

	t.Run("marker lost", func(t *testing.T) {
		if err := os.Remove(filepath.Join(dir, encryptionFile)); err != nil {
			t.Fatal(err)
		}
		refused(t, wrong, storekey.ErrWrongKey, "does not open the encrypted streams")
		refused(t, "", storekey.ErrKeyRequired, "are encrypted")
		conn := mustDial(t, dir, right)
		checkSecrets(t, conn)
		conn.Close()
		if _, err := os.Stat(filepath.Join(dir, encryptionFile)); err != nil {
			t.Fatalf("the marker was not written again: %v", err)
		}
		refused(t, wrong, storekey.ErrWrongKey, "not the key")
	})

	t.Run("plaintext store", func(t *testing.T) {
		plain := filepath.Join(t.TempDir(), "spl")
		conn := mustDial(t, plain, "")
		writeSecrets(t, conn)
		conn.Close()
		c, err := dialKey(t, plain, right)
		if !errors.Is(err, storekey.ErrNotEncrypted) || !strings.Contains(err.Error(), "spl export") {
			if c != nil {
				c.Close()
			}
			t.Fatalf("open a plaintext store with a key: %v, want ErrNotEncrypted saying how", err)
		}
		conn = mustDial(t, plain, "")
		checkSecrets(t, conn)
		conn.Close()
	})

	t.Run("key inside", func(t *testing.T) {
		in := newKey(t, dir, "store.key").File
		refused(t, in, storekey.ErrKeyInDir, in)
	})
}

// TestJoinKey: a process that joins the server another runs on an
// encrypted directory needs the same key, since it may take its place.
func TestJoinKey(t *testing.T) {
	t.Setenv(env.EncryptionKeyFileVar, "")
	keys := t.TempDir()
	right, wrong := newKey(t, keys, "right").File, newKey(t, keys, "wrong").File
	dir := filepath.Join(t.TempDir(), "spl")
	owner := mustDial(t, dir, right)
	defer owner.Close()
	if !owner.Serving() {
		t.Fatal("the first process does not serve")
	}
	for _, c := range []struct {
		key  string
		want error
	}{{"", storekey.ErrKeyRequired}, {wrong, storekey.ErrWrongKey}} {
		if j, err := dialKey(t, dir, c.key); !errors.Is(err, c.want) {
			if j != nil {
				j.Close()
			}
			t.Fatalf("join with key %q: %v, want %v", c.key, err, c.want)
		}
	}
	j := mustDial(t, dir, right)
	defer j.Close()
	if j.Serving() {
		t.Fatal("the second process serves")
	}

	// A plaintext server: a process with a key does not join it.
	plain := filepath.Join(t.TempDir(), "spl")
	p := mustDial(t, plain, "")
	defer p.Close()
	if j, err := dialKey(t, plain, right); !errors.Is(err, storekey.ErrNotEncrypted) {
		if j != nil {
			j.Close()
		}
		t.Fatalf("join a plaintext server with a key: %v", err)
	}
}

// TestScrubEncrypted: the scrub of half-done secure deletes leaves the
// blocks of an encrypted store as they are: it cannot read their records,
// and must not take ciphertext for them.
func TestScrubEncrypted(t *testing.T) {
	t.Setenv(env.EncryptionKeyFileVar, "")
	key := newKey(t, t.TempDir(), "k").File
	dir := filepath.Join(t.TempDir(), "spl")
	conn := mustDial(t, dir, key)
	writeSecrets(t, conn)
	conn.Close()
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "rec", "msgs", "*.blk"))
	if err != nil || len(blocks) == 0 {
		t.Fatalf("blocks %v, %v", blocks, err)
	}
	before := make(map[string][]byte)
	for _, b := range blocks {
		before[b], _ = os.ReadFile(b)
	}
	if err := os.MkdirAll(filepath.Join(dir, erasingDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, erasingDir, "intent.1"), []byte("rec\n1\n2\n3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := scrub(dir); err != nil {
		t.Fatal(err)
	}
	for b, was := range before {
		if now, _ := os.ReadFile(b); !bytes.Equal(now, was) {
			t.Fatalf("scrub changed %s", b)
		}
	}
	conn = mustDial(t, dir, key)
	defer conn.Close()
	checkSecrets(t, conn)
}

// TestEngineSkipsUndecryptable holds nats-server to the behaviour the
// checks of atrest.go guard against, so that an upgrade that changes it
// is noticed: started with the wrong key, or none, on an encrypted store,
// it starts without the stream rather than failing.
func TestEngineSkipsUndecryptable(t *testing.T) {
	dir := t.TempDir()
	run := func(key string, f func(c *Conn)) {
		t.Helper()
		opts := EmbeddedServerOptions(dir, true)
		opts.JetStreamKey = key
		srv, err := StartServer(opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		c, err := Dial(context.Background(), Options{URL: srv.ClientURL()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f(c)
	}
	run("right", func(c *Conn) {
		if _, err := c.JS.CreateStream(context.Background(), jetstream.StreamConfig{Name: "rec"}); err != nil {
			t.Fatal(err)
		}
	})
	for _, key := range []string{"wrong", ""} {
		run(key, func(c *Conn) {
			if _, err := c.JS.Stream(context.Background(), "rec"); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatalf("key %q: stream %v, want it not loaded", key, err)
			}
		})
	}
	run("right", func(c *Conn) {
		if _, err := c.JS.Stream(context.Background(), "rec"); err != nil {
			t.Fatalf("the stream is gone: %v", err)
		}
	})
}

// TestEngineSecureDeleteEncrypted pins what docs/erasure.md says of an
// encrypted store: nats-server's secure delete is a plain delete there
// (filestore.go, removeMsg), so an erased message's ciphertext stays in
// its block, the block's bytes before the delete unchanged, while on a
// plaintext store they are overwritten.
func TestEngineSecureDeleteEncrypted(t *testing.T) {
	for _, c := range []struct {
		key         string
		overwritten bool
	}{{"", true}, {"k", false}} {
		dir := t.TempDir()
		opts := EmbeddedServerOptions(dir, true)
		opts.JetStreamKey = c.key
		srv, err := StartServer(opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := Dial(context.Background(), Options{URL: srv.ClientURL()})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s, err := conn.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "rec", Subjects: []string{"rec.>"}})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := conn.JS.Publish(ctx, "rec.x", []byte(secret)); err != nil {
				t.Fatal(err)
			}
		}
		blk := filepath.Join(dir, "jetstream", "$G", "streams", "rec", "msgs", "1.blk")
		before, err := os.ReadFile(blk)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SecureDeleteMsg(ctx, 2); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		after, err := os.ReadFile(blk)
		if err != nil {
			t.Fatal(err)
		}
		kept := len(after) >= len(before) && bytes.Equal(after[:len(before)], before)
		if kept == c.overwritten {
			t.Errorf("key %q: the deleted message's bytes kept=%v, want %v", c.key, kept, !c.overwritten)
		}
	}
}
