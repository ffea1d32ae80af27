// Package keyhash is BLAKE3's keyed hash mode, written out for the short
// inputs that record bodies mostly are. zeebo/blake3, the project's BLAKE3,
// sets a key only by allocating a new hasher (about 11 KB, zeroed), which
// cost more than hashing a 1 KB body itself; this one keeps its whole state
// on the stack. It is plain Go, one block at a time, so past a couple of
// KB the library's vectorized code is faster: records uses each where it
// wins. Its tests hold it to the official test vectors and to the library
// on every length.
package keyhash

import (
	"encoding/binary"
	"math/bits"
)

const (
	flagChunkStart = 1 << 0
	flagChunkEnd   = 1 << 1
	flagParent     = 1 << 2
	flagRoot       = 1 << 3
	flagKeyed      = 1 << 4

	blockLen = 64
	chunkLen = 1024
)

var iv = [4]uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A}

// schedule[r] is the message word order of round r: the permutation
// applied r times.
var schedule = func() (s [7][16]uint8) {
	perm := [16]uint8{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}
	for i := range s[0] {
		s[0][i] = uint8(i)
	}
	for r := 1; r < 7; r++ {
		for i := range 16 {
			s[r][i] = s[r-1][perm[i]]
		}
	}
	return s
}()

// compress is BLAKE3's compression function; it returns the first half
// of the output (the chaining value, or the hash of a root node).
func compress(cv *[8]uint32, m *[16]uint32, counter uint64, n uint32, flags uint32) [8]uint32 {
	v0, v1, v2, v3, v4, v5, v6, v7 := cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7]
	v8, v9, v10, v11 := iv[0], iv[1], iv[2], iv[3]
	v12, v13, v14, v15 := uint32(counter), uint32(counter>>32), n, flags
	for r := range 7 {
		s := &schedule[r]
		// columns
		v0 += v4 + m[s[0]]
		v12 = bits.RotateLeft32(v12^v0, -16)
		v8 += v12
		v4 = bits.RotateLeft32(v4^v8, -12)
		v0 += v4 + m[s[1]]
		v12 = bits.RotateLeft32(v12^v0, -8)
		v8 += v12
		v4 = bits.RotateLeft32(v4^v8, -7)

		v1 += v5 + m[s[2]]
		v13 = bits.RotateLeft32(v13^v1, -16)
		v9 += v13
		v5 = bits.RotateLeft32(v5^v9, -12)
		v1 += v5 + m[s[3]]
		v13 = bits.RotateLeft32(v13^v1, -8)
		v9 += v13
		v5 = bits.RotateLeft32(v5^v9, -7)

		v2 += v6 + m[s[4]]
		v14 = bits.RotateLeft32(v14^v2, -16)
		v10 += v14
		v6 = bits.RotateLeft32(v6^v10, -12)
		v2 += v6 + m[s[5]]
		v14 = bits.RotateLeft32(v14^v2, -8)
		v10 += v14
		v6 = bits.RotateLeft32(v6^v10, -7)

		v3 += v7 + m[s[6]]
		v15 = bits.RotateLeft32(v15^v3, -16)
		v11 += v15
		v7 = bits.RotateLeft32(v7^v11, -12)
		v3 += v7 + m[s[7]]
		v15 = bits.RotateLeft32(v15^v3, -8)
		v11 += v15
		v7 = bits.RotateLeft32(v7^v11, -7)

		// diagonals
		v0 += v5 + m[s[8]]
		v15 = bits.RotateLeft32(v15^v0, -16)
		v10 += v15
		v5 = bits.RotateLeft32(v5^v10, -12)
		v0 += v5 + m[s[9]]
		v15 = bits.RotateLeft32(v15^v0, -8)
		v10 += v15
		v5 = bits.RotateLeft32(v5^v10, -7)

		v1 += v6 + m[s[10]]
		v12 = bits.RotateLeft32(v12^v1, -16)
		v11 += v12
		v6 = bits.RotateLeft32(v6^v11, -12)
		v1 += v6 + m[s[11]]
		v12 = bits.RotateLeft32(v12^v1, -8)
		v11 += v12
		v6 = bits.RotateLeft32(v6^v11, -7)

		v2 += v7 + m[s[12]]
		v13 = bits.RotateLeft32(v13^v2, -16)
		v8 += v13
		v7 = bits.RotateLeft32(v7^v8, -12)
		v2 += v7 + m[s[13]]
		v13 = bits.RotateLeft32(v13^v2, -8)
		v8 += v13
		v7 = bits.RotateLeft32(v7^v8, -7)

		v3 += v4 + m[s[14]]
		v14 = bits.RotateLeft32(v14^v3, -16)
		v9 += v14
		v4 = bits.RotateLeft32(v4^v9, -12)
		v3 += v4 + m[s[15]]
		v14 = bits.RotateLeft32(v14^v3, -8)
		v9 += v14
		v4 = bits.RotateLeft32(v4^v9, -7)
	}
	return [8]uint32{v0 ^ v8, v1 ^ v9, v2 ^ v10, v3 ^ v11, v4 ^ v12, v5 ^ v13, v6 ^ v14, v7 ^ v15}
}

// chunk returns the chaining value of one chunk (at most 1024 bytes) at
// index counter, with extra added to the flags of its last block (ROOT
// when the chunk is the whole input).
func chunk(key *[8]uint32, data []byte, counter uint64, extra uint32) [8]uint32 {
	cv := *key
	var m [16]uint32
	flags := uint32(flagKeyed | flagChunkStart)
	for {
		n := min(len(data), blockLen)
		last := len(data) <= blockLen
		if n == blockLen {
			for i := range m {
				m[i] = binary.LittleEndian.Uint32(data[4*i:])
			}
		} else {
			var b [blockLen]byte
			copy(b[:], data[:n])
			for i := range m {
				m[i] = binary.LittleEndian.Uint32(b[4*i:])
			}
		}
		if last {
			return compress(&cv, &m, counter, uint32(n), flags|flagChunkEnd|extra)
		}
		cv = compress(&cv, &m, counter, blockLen, flags)
		flags &^= flagChunkStart
		data = data[blockLen:]
	}
}

// parent returns the chaining value of a parent node.
func parent(key *[8]uint32, left, right *[8]uint32, extra uint32) [8]uint32 {
	var m [16]uint32
	copy(m[:8], left[:])
	copy(m[8:], right[:])
	return compress(key, &m, 0, blockLen, flagKeyed|flagParent|extra)
}

// Sum256 returns BLAKE3's keyed hash of data under key: the 32-byte
// output of the keyed_hash mode. It does not allocate.
func Sum256(key *[32]byte, data []byte) [32]byte {
	var k [8]uint32
	for i := range k {
		k[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	var out [8]uint32
	if len(data) <= chunkLen {
		out = chunk(&k, data, 0, flagRoot)
	} else {
		var stack [54][8]uint32
		n := 0
		chunks := (len(data) + chunkLen - 1) / chunkLen
		for c := 0; c < chunks-1; c++ {
			cv := chunk(&k, data[c*chunkLen:(c+1)*chunkLen], uint64(c), 0)
			for total := uint64(c + 1); total&1 == 0; total >>= 1 {
				n--
				cv = parent(&k, &stack[n], &cv, 0)
			}
			stack[n] = cv
			n++
		}
		cv := chunk(&k, data[(chunks-1)*chunkLen:], uint64(chunks-1), 0)
		for n > 1 {
			n--
			cv = parent(&k, &stack[n], &cv, 0)
		}
		out = parent(&k, &stack[0], &cv, flagRoot)
	}
	var d [32]byte
	for i, w := range out {
		binary.LittleEndian.PutUint32(d[4*i:], w)
	}
	return d
}
