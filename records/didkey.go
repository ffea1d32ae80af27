package records

import (
	"crypto/ed25519"
	"fmt"
	"math/big"
	"strings"
)

// did:key for Ed25519 (W3C CCG did:key method, the form every did:key
// library writes and reads):
//
//	did:key:z<base58btc(0xed 0x01 || 32-byte public key)>
//
// "z" is the multibase prefix of base58btc, 0xed01 the unsigned varint of
// the multicodec ed25519-pub (0xed). Such a DID always starts "did:key:z6Mk".
// It is self-certifying: the key is in the DID, so no record binds it.

// didKeyPrefix is the text before the multibase value of a did:key.
const didKeyPrefix = "did:key:z"

// ed25519PubCodec is the multicodec ed25519-pub as an unsigned varint.
var ed25519PubCodec = [2]byte{0xed, 0x01}

// DIDKey returns the did:key of an Ed25519 public key.
func DIDKey(pub ed25519.PublicKey) string {
	b := make([]byte, 0, 2+ed25519.PublicKeySize)
	b = append(b, ed25519PubCodec[:]...)
	b = append(b, pub...)
	return didKeyPrefix + base58Encode(b)
}

// IsDIDKey reports whether did uses the did:key method.
func IsDIDKey(did string) bool { return strings.HasPrefix(did, "did:key:") }

// ParseDIDKey returns the Ed25519 public key of a did:key. Any other DID,
// multibase or multicodec is an error wrapping [ErrInvalid].
func ParseDIDKey(did string) (ed25519.PublicKey, error) {
	enc, ok := strings.CutPrefix(did, didKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("parse did:key %s: want did:key:z… (base58btc): %w", quote(did), ErrInvalid)
	}
	b, ok := base58Decode(enc)
	if !ok {
		return nil, fmt.Errorf("parse did:key %s: not base58btc: %w", quote(did), ErrInvalid)
	}
	if len(b) != 2+ed25519.PublicKeySize || b[0] != ed25519PubCodec[0] || b[1] != ed25519PubCodec[1] {
		return nil, fmt.Errorf("parse did:key %s: not an Ed25519 key (multicodec 0xed01, 32 bytes): %w", quote(did), ErrInvalid)
	}
	return ed25519.PublicKey(b[2:]), nil
}

// base58btc: the Bitcoin alphabet, leading zero bytes as leading '1's.
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var big58 = big.NewInt(58)

func base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	n := new(big.Int).SetBytes(b)
	var out []byte
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, big58, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for range zeros {
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func base58Decode(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	n := new(big.Int)
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(base58Alphabet, s[i])
		if d < 0 {
			return nil, false
		}
		n.Mul(n, big58)
		n.Add(n, big.NewInt(int64(d)))
	}
	return append(make([]byte, zeros), n.Bytes()...), true
}
