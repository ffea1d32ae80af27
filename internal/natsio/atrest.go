package natsio

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spl-dev/spl/storekey"
)

// Encryption at rest.
//
// nats-server encrypts a JetStream file store when it is given a key
// (Options.JetStreamKey): each stream's configuration, under a key of the
// stream's own (meta.key), and each message block, under a key of the
// block's own (<n>.key), with ChaCha20-Poly1305 or AES-GCM
// (JetStreamCipher); the staging stores of atomic batches too. Everything
// spl keeps lives in JetStream — the log's stream and its stream of
// bodies kept outside their records, the read models' KV buckets, the
// object store of large payloads — so that one setting covers it. The
// other files of a data directory (lock, server.json, the tokens, mark,
// the erasure intents, this marker) hold no record's bytes.
//
// What nats-server does not do is refuse a store it cannot open. Found by
// experiment (nats-server 2.15): started on an encrypted store with the
// wrong key or with none, it logs a warning per stream ("Error decrypting
// our stream metafile") and starts without them; a stream then created
// under the same name, as the log creates its stream when it finds none,
// fails ("error creating store for stream") and removes the old stream's
// directory: the records are gone. Started with a key on a store that is
// not encrypted, it encrypts every block in place, the block's new key
// written before the block is, so that a crash halfway loses the block.
//
// So the store is checked before the server starts. A data directory
// whose store is encrypted holds a marker (encryptionFile: the cipher and
// storekey.Key.Check of the key), written before the first encrypted
// server starts; the streams on disk say which of them are encrypted (a
// meta.key beside their meta.inf). planStore decides from both; after the
// start, StoreCheck.Started makes sure that every encrypted stream on disk
// was loaded, which also covers a marker that was lost. A process that
// joins the server another runs checks its key against the marker
// (checkJoin): any of them may take its place when it exits.

// encryptionFile is the marker of an encrypted store, in the data
// directory.
const encryptionFile = "encryption"

// The ciphers of an encrypted store, as the marker and spl serve's
// --encryption-cipher name them.
const (
	CipherChaCha = "chacha20-poly1305" // the default
	CipherAES    = "aes-gcm"
)

// encryptionInfo is the content of the marker.
type encryptionInfo struct {
	Cipher string `json:"cipher"`
	Check  string `json:"key_check"` // storekey.Key.Check of the key
}

// Encryption says how the store of a data directory is encrypted at rest.
// The zero value is a store that is not.
type Encryption struct {
	// Key encrypts the store; nil: it is not encrypted.
	Key *storekey.Key
	// Cipher is the cipher of a store encrypted from now on (CipherChaCha
	// when empty). A store already encrypted keeps its own.
	Cipher string
	// Hint tells the user how to name a key, for ErrKeyRequired:
	// "set SPL_ENCRYPTION_KEY_FILE", "--encryption-key-file FILE".
	Hint string
}

// storeState is what a data directory holds before a server starts on it.
type storeState struct {
	dir       string          // the data directory, for messages
	marker    *encryptionInfo // nil: no marker
	encrypted []string        // streams on disk with a key file, "account > stream"
	plain     []string        // streams on disk without one
}

// storePlan is how a server opens a store.
type storePlan struct {
	cipher    string // the store's cipher, "" when not encrypted
	newMarker bool   // write the marker before the start: a new encrypted store
	rewrite   bool   // write it after the start: it was lost
}

// planStore decides how a store in state st is opened with enc, or
// refuses it with an error wrapping a storekey sentinel. It reads and
// writes nothing.
func planStore(st storeState, enc Encryption) (storePlan, error) {
	key := enc.Key
	if key == nil {
		switch {
		case st.marker != nil:
			return storePlan{}, fmt.Errorf("%w: the store in %s is encrypted (%s says so); %s to the key file it was encrypted with", storekey.ErrKeyRequired, st.dir, filepath.Join(st.dir, encryptionFile), enc.Hint)
		case len(st.encrypted) > 0:
			return storePlan{}, fmt.Errorf("%w: the streams %s of the store in %s are encrypted; %s to the key file they were encrypted with", storekey.ErrKeyRequired, strings.Join(st.encrypted, ", "), st.dir, enc.Hint)
		}
		return storePlan{}, nil
	}
	if len(st.plain) > 0 {
		return storePlan{}, fmt.Errorf("%w: a key (%v) was given, and the streams %s of the store in %s are not encrypted; to encrypt them, export the log (spl export --all) and import it into a new data directory opened with the key",
			storekey.ErrNotEncrypted, key, strings.Join(st.plain, ", "), st.dir)
	}
	cipher := enc.Cipher
	if cipher == "" {
		cipher = CipherChaCha
	}
	if st.marker == nil {
		// A new store, or one whose marker was lost: the check after the
		// start finds a wrong key then.
		return storePlan{cipher: cipher, newMarker: len(st.encrypted) == 0, rewrite: len(st.encrypted) > 0}, nil
	}
	if enc.Cipher != "" && enc.Cipher != st.marker.Cipher {
		return storePlan{}, fmt.Errorf("spl/natsio: the store in %s is encrypted with %s, not %s; to change the cipher, export the log and import it into a new data directory", st.dir, st.marker.Cipher, enc.Cipher)
	}
	if key.Opens(st.marker.Check) {
		return storePlan{cipher: st.marker.Cipher}, nil
	}
	return storePlan{}, fmt.Errorf("%w: %v is not the key the store in %s was encrypted with", storekey.ErrWrongKey, key, st.dir)
}

// readStore reads the state of dir's store.
func readStore(dir string) (storeState, error) {
	st := storeState{dir: dir}
	m, err := readMarker(dir)
	if err != nil {
		return st, err
	}
	st.marker = m
	accounts, err := os.ReadDir(filepath.Join(dir, "jetstream"))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read store: %w", err)
	}
	for _, a := range accounts {
		sdir := filepath.Join(dir, "jetstream", a.Name(), "streams")
		streams, err := os.ReadDir(sdir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("read store: %w", err)
		}
		for _, s := range streams {
			if _, err := os.Stat(filepath.Join(sdir, s.Name(), server.JetStreamMetaFile)); err != nil {
				continue // no stream: nats-server skips it too
			}
			name := a.Name() + " > " + s.Name()
			if _, err := os.Stat(filepath.Join(sdir, s.Name(), server.JetStreamMetaFileKey)); err == nil {
				st.encrypted = append(st.encrypted, name)
			} else {
				st.plain = append(st.plain, name)
			}
		}
	}
	return st, nil
}

func readMarker(dir string) (*encryptionInfo, error) {
	path := filepath.Join(dir, encryptionFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var m encryptionInfo
	if err := json.Unmarshal(b, &m); err != nil || m.Check == "" || (m.Cipher != CipherChaCha && m.Cipher != CipherAES) {
		// Written whole or not at all (WriteJSONFile): this is no marker
		// of ours. Refused rather than taken for none, which would let a
		// server start on the store without its key.
		return nil, fmt.Errorf("read %s: not a marker of an encrypted store (%q); it says the store is encrypted: restore it, or remove it if the store is not", path, b)
	}
	return &m, nil
}

func writeMarker(dir, cipher string, key *storekey.Key) error {
	return WriteJSONFile(filepath.Join(dir, encryptionFile), encryptionInfo{Cipher: cipher, Check: key.Check()})
}

// StoreCheck is the rest of OpenStore's work, done once the server runs.
type StoreCheck struct {
	dir  string
	enc  Encryption
	st   storeState
	plan storePlan
}

// OpenStore checks the store of dir against enc before a server starts on
// it, and sets opts so that the server opens it: its JetStream key and
// cipher. The caller holds the directory's lock. It writes the marker of
// a new encrypted store. Once the server runs, the caller calls the
// check's Started before anything touches the store.
//
// It refuses, with an error wrapping a storekey sentinel: an encrypted
// store without a key (ErrKeyRequired), with a key that is not its own
// (ErrWrongKey), a store holding data not encrypted with a key
// (ErrNotEncrypted), and a key file inside dir (ErrKeyInDir).
func OpenStore(dir string, enc Encryption, opts *server.Options) (*StoreCheck, error) {
	if err := keyOutside(enc.Key, dir); err != nil {
		return nil, err
	}
	switch enc.Cipher {
	case "", CipherChaCha, CipherAES:
	default:
		return nil, fmt.Errorf("spl/natsio: cipher %q: must be %s or %s", enc.Cipher, CipherChaCha, CipherAES)
	}
	st, err := readStore(dir)
	if err != nil {
		return nil, fmt.Errorf("spl/natsio: %w", err)
	}
	plan, err := planStore(st, enc)
	if err != nil {
		return nil, err
	}
	if plan.newMarker {
		if err := writeMarker(dir, plan.cipher, enc.Key); err != nil {
			return nil, fmt.Errorf("spl/natsio: %w", err)
		}
	}
	if enc.Key != nil {
		opts.JetStreamKey = enc.Key.ServerKey()
		opts.JetStreamCipher = server.ChaCha
		if plan.cipher == CipherAES {
			opts.JetStreamCipher = server.AES
		}
	}
	return &StoreCheck{dir: dir, enc: enc, st: st, plan: plan}, nil
}

// keyOutside refuses a key file inside the data directory dir.
func keyOutside(k *storekey.Key, dir string) error {
	if k == nil {
		return nil
	}
	in, err := k.Inside(dir)
	if err != nil {
		return fmt.Errorf("spl/natsio: encryption key %v: %w", k, err)
	}
	if in {
		return fmt.Errorf("%w: %v is inside %s; whoever reads the directory (or a copy of it) would read the key with the data: keep it elsewhere", storekey.ErrKeyInDir, k, dir)
	}
	return nil
}

// Started checks, once srv runs, that it loaded every encrypted stream it
// found on disk: a stream it could not decrypt is not loaded, and would
// be lost to the first client that creates it again. Then it writes the
// marker again when it was lost. A server of a cluster is
// not checked here: it loads its streams as the cluster assigns them.
func (c *StoreCheck) Started(srv *server.Server) error {
	if c == nil || c.enc.Key == nil {
		return nil
	}
	if !srv.JetStreamIsClustered() {
		js, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
		if err != nil {
			return fmt.Errorf("spl/natsio: check the store: %w", err)
		}
		var loaded []string
		for _, a := range js.AccountDetails {
			for _, s := range a.Streams {
				loaded = append(loaded, a.Name+" > "+s.Name)
			}
		}
		var missing []string
		for _, s := range c.st.encrypted {
			if !slices.Contains(loaded, s) {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: %v does not open the encrypted streams %s of the store in %s (the server did not load them); they are left on disk as they were",
				storekey.ErrWrongKey, c.enc.Key, strings.Join(missing, ", "), c.dir)
		}
	}
	if c.plan.rewrite {
		if err := writeMarker(c.dir, c.plan.cipher, c.enc.Key); err != nil {
			return fmt.Errorf("spl/natsio: %w", err)
		}
	}
	return nil
}

// checkJoin checks the key of a process that joins the server another
// process runs on dir against the directory's marker: the server it
// joins is encrypted with the marker's key, and the process may take its
// place when it exits. A process with a key that finds no marker while a
// server is published joins a server that does not encrypt.
func checkJoin(dir string, key *storekey.Key, hint string) error {
	// The server's address first: a server with a key writes the marker
	// before it starts, so before it publishes the address.
	info, aerr := readAddr(dir)
	published := aerr == nil && info.URL != ""
	m, err := readMarker(dir)
	if err != nil {
		return fmt.Errorf("spl/natsio: %w", err)
	}
	switch {
	case m != nil && key == nil:
		return fmt.Errorf("%w: the store in %s is encrypted (%s says so); %s to the key file it was encrypted with", storekey.ErrKeyRequired, dir, filepath.Join(dir, encryptionFile), hint)
	case m != nil && !key.Opens(m.Check):
		return fmt.Errorf("%w: %v is not the key the store in %s was encrypted with", storekey.ErrWrongKey, key, dir)
	case m == nil && key != nil && published:
		return fmt.Errorf("%w: a key (%v) was given, and the server that serves %s does not encrypt its store", storekey.ErrNotEncrypted, key, dir)
	}
	return nil
}
