package keyhash

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/zeebo/blake3"
)

// vectors are BLAKE3's official test vectors (test_vectors.json of the
// reference implementation): the first 32 bytes of keyed_hash, for the
// input 0, 1, 2, ... 250, 0, 1, ... of the given length under the key
// "whats the Elvish word for friend".
var vectors = []struct {
	n    int
	want string
}{
	{0, "92b2b75604ed3c761f9d6f62392c8a9227ad0ea3f09573e783f1498a4ed60d26"},
	{1, "6d7878dfff2f485635d39013278ae14f1454b8c0a3a2d34bc1ab38228a80c95b"},
	{1023, "c951ecdf03288d0fcc96ee3413563d8a6d3589547f2c2fb36d9786470f1b9d6e"},
	{1024, "75c46f6f3d9eb4f55ecaaee480db732e6c2105546f1e675003687c31719c7ba4"},
	{1025, "357dc55de0c7e382c900fd6e320acc04146be01db6a8ce7210b7189bd664ea69"},
	{2048, "879cf1fa2ea0e79126cb1063617a05b6ad9d0b696d0d757cf053439f60a99dd1"},
	{2049, "9f29700902f7c86e514ddc4df1e3049f258b2472b6dd5267f61bf13983b78dd5"},
	{3072, "044a0e7b172a312dc02a4c9a818c036ffa2776368d7f528268d2e6b5df191770"},
	{3073, "68dede9bef00ba89e43f31a6825f4cf433389fedae75c04ee9f0cf16a427c95a"},
	{4096, "befc660aea2f1718884cd8deb9902811d332f4fc4a38cf7c7300d597a081bfc0"},
	{4097, "00df940cd36bb9fa7cbbc3556744e0dbc8191401afe70520ba292ee3ca80abbc"},
	{5120, "2c493e48e9b9bf31e0553a22b23503c0a3388f035cece68eb438d22fa1943e20"},
	{5121, "6ccf1c34753e7a044db80798ecd0782a8f76f33563accaddbfbb2e0ea4b2d024"},
	{6144, "3d6b6d21281d0ade5b2b016ae4034c5dec10ca7e475f90f76eac7138e9bc8f1d"},
	{6145, "9ac301e9e39e45e3250a7e3b3df701aa0fb6889fbd80eeecf28dbc6300fbc539"},
	{7168, "b42835e40e9d4a7f42ad8cc04f85a963a76e18198377ed84adddeaecacc6f3fc"},
	{7169, "ed9b1a922c046fdb3d423ae34e143b05ca1bf28b710432857bf738bcedbfa511"},
	{8192, "dc9637c8845a770b4cbf76b8daec0eebf7dc2eac11498517f08d44c8fc00d58a"},
	{8193, "954a2a75420c8d6547e3ba5b98d963e6fa6491addc8c023189cc519821b4a1f5"},
	{16384, "9e9fc4eb7cf081ea7c47d1807790ed211bfec56aa25bb7037784c13c4b707b0d"},
	{31744, "efa53b389ab67c593dba624d898d0f7353ab99e4ac9d42302ee64cbf9939a419"},
}

func TestVectors(t *testing.T) {
	var key [32]byte
	copy(key[:], "whats the Elvish word for friend")
	for _, v := range vectors {
		in := make([]byte, v.n)
		for i := range in {
			in[i] = byte(i % 251)
		}
		got := Sum256(&key, in)
		if hex.EncodeToString(got[:]) != v.want {
			t.Errorf("len %d: %x, want %s", v.n, got, v.want)
		}
	}
}

func library(key *[32]byte, data []byte) [32]byte {
	h, err := blake3.NewKeyed(key[:])
	if err != nil {
		panic(err)
	}
	_, _ = h.Write(data)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Every length up to three chunks, and a sample beyond, with random keys
// and data, gives the library's answer.
func TestMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 40_000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for n := 0; n <= len(data); n++ {
		if n > 3*chunkLen && n%89 != 0 {
			continue
		}
		var key [32]byte
		for i := range key {
			key[i] = byte(r.Uint32())
		}
		if got, want := Sum256(&key, data[:n]), library(&key, data[:n]); got != want {
			t.Fatalf("len %d: %x, want %x", n, got, want)
		}
	}
}

func FuzzMatchesLibrary(f *testing.F) {
	f.Add(make([]byte, 32), []byte("x"))
	f.Add(bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte("ab"), 1500))
	f.Fuzz(func(t *testing.T, k, data []byte) {
		var key [32]byte
		copy(key[:], k)
		if got, want := Sum256(&key, data), library(&key, data); got != want {
			t.Fatalf("len %d: %x, want %x", len(data), got, want)
		}
	})
}

// BenchmarkKeyed compares Sum256 with the library's keyed hasher on a
// typical checkpoint body and at the size records switches over.
func BenchmarkKeyed(b *testing.B) {
	var key [32]byte
	for _, n := range []int{1000, 2048, 8192} {
		data := make([]byte, n)
		b.Run("keyhash/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				_ = Sum256(&key, data)
			}
		})
		b.Run("zeebo/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				_ = library(&key, data)
			}
		})
	}
}
