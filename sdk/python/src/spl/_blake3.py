"""BLAKE3 in pure Python (hash and keyed hash, 32-byte output).

hashlib has no BLAKE3 in Python 3.11, and spl's SDK has no third-party
dependency at run time, so this follows the BLAKE3 specification's
reference implementation. It is checked against records/testdata/vectors.json
(ids and keyed body digests) by the tests. It is slow (about 20 µs a
64-byte block): fine for verifying records, not for bulk hashing.
"""

from __future__ import annotations

_M = 0xFFFFFFFF
_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT, _KEYED_HASH = 1, 2, 4, 8, 16
_BLOCK_LEN, _CHUNK_LEN = 64, 1024

# The message word order of each of the 7 rounds, permutations applied.
_SCHEDULE = []
_order = list(range(16))
for _ in range(7):
    _SCHEDULE.append(tuple(_order))
    _order = [_order[i] for i in _PERM]


def _compress(cv, m, counter, block_len, flags):
    s0, s1, s2, s3, s4, s5, s6, s7 = cv
    s8, s9, s10, s11 = _IV[0], _IV[1], _IV[2], _IV[3]
    s12, s13, s14, s15 = counter & _M, (counter >> 32) & _M, block_len, flags
    for o in _SCHEDULE:
        # Columns.
        s0 = (s0 + s4 + m[o[0]]) & _M; s12 ^= s0; s12 = ((s12 >> 16) | (s12 << 16)) & _M
        s8 = (s8 + s12) & _M; s4 ^= s8; s4 = ((s4 >> 12) | (s4 << 20)) & _M
        s0 = (s0 + s4 + m[o[1]]) & _M; s12 ^= s0; s12 = ((s12 >> 8) | (s12 << 24)) & _M
        s8 = (s8 + s12) & _M; s4 ^= s8; s4 = ((s4 >> 7) | (s4 << 25)) & _M
        s1 = (s1 + s5 + m[o[2]]) & _M; s13 ^= s1; s13 = ((s13 >> 16) | (s13 << 16)) & _M
        s9 = (s9 + s13) & _M; s5 ^= s9; s5 = ((s5 >> 12) | (s5 << 20)) & _M
        s1 = (s1 + s5 + m[o[3]]) & _M; s13 ^= s1; s13 = ((s13 >> 8) | (s13 << 24)) & _M
        s9 = (s9 + s13) & _M; s5 ^= s9; s5 = ((s5 >> 7) | (s5 << 25)) & _M
        s2 = (s2 + s6 + m[o[4]]) & _M; s14 ^= s2; s14 = ((s14 >> 16) | (s14 << 16)) & _M
        s10 = (s10 + s14) & _M; s6 ^= s10; s6 = ((s6 >> 12) | (s6 << 20)) & _M
        s2 = (s2 + s6 + m[o[5]]) & _M; s14 ^= s2; s14 = ((s14 >> 8) | (s14 << 24)) & _M
        s10 = (s10 + s14) & _M; s6 ^= s10; s6 = ((s6 >> 7) | (s6 << 25)) & _M
        s3 = (s3 + s7 + m[o[6]]) & _M; s15 ^= s3; s15 = ((s15 >> 16) | (s15 << 16)) & _M
        s11 = (s11 + s15) & _M; s7 ^= s11; s7 = ((s7 >> 12) | (s7 << 20)) & _M
        s3 = (s3 + s7 + m[o[7]]) & _M; s15 ^= s3; s15 = ((s15 >> 8) | (s15 << 24)) & _M
        s11 = (s11 + s15) & _M; s7 ^= s11; s7 = ((s7 >> 7) | (s7 << 25)) & _M
        # Diagonals.
        s0 = (s0 + s5 + m[o[8]]) & _M; s15 ^= s0; s15 = ((s15 >> 16) | (s15 << 16)) & _M
        s10 = (s10 + s15) & _M; s5 ^= s10; s5 = ((s5 >> 12) | (s5 << 20)) & _M
        s0 = (s0 + s5 + m[o[9]]) & _M; s15 ^= s0; s15 = ((s15 >> 8) | (s15 << 24)) & _M
        s10 = (s10 + s15) & _M; s5 ^= s10; s5 = ((s5 >> 7) | (s5 << 25)) & _M
        s1 = (s1 + s6 + m[o[10]]) & _M; s12 ^= s1; s12 = ((s12 >> 16) | (s12 << 16)) & _M
        s11 = (s11 + s12) & _M; s6 ^= s11; s6 = ((s6 >> 12) | (s6 << 20)) & _M
        s1 = (s1 + s6 + m[o[11]]) & _M; s12 ^= s1; s12 = ((s12 >> 8) | (s12 << 24)) & _M
        s11 = (s11 + s12) & _M; s6 ^= s11; s6 = ((s6 >> 7) | (s6 << 25)) & _M
        s2 = (s2 + s7 + m[o[12]]) & _M; s13 ^= s2; s13 = ((s13 >> 16) | (s13 << 16)) & _M
        s8 = (s8 + s13) & _M; s7 ^= s8; s7 = ((s7 >> 12) | (s7 << 20)) & _M
        s2 = (s2 + s7 + m[o[13]]) & _M; s13 ^= s2; s13 = ((s13 >> 8) | (s13 << 24)) & _M
        s8 = (s8 + s13) & _M; s7 ^= s8; s7 = ((s7 >> 7) | (s7 << 25)) & _M
        s3 = (s3 + s4 + m[o[14]]) & _M; s14 ^= s3; s14 = ((s14 >> 16) | (s14 << 16)) & _M
        s9 = (s9 + s14) & _M; s4 ^= s9; s4 = ((s4 >> 12) | (s4 << 20)) & _M
        s3 = (s3 + s4 + m[o[15]]) & _M; s14 ^= s3; s14 = ((s14 >> 8) | (s14 << 24)) & _M
        s9 = (s9 + s14) & _M; s4 ^= s9; s4 = ((s4 >> 7) | (s4 << 25)) & _M
    return (s0 ^ s8, s1 ^ s9, s2 ^ s10, s3 ^ s11, s4 ^ s12, s5 ^ s13, s6 ^ s14, s7 ^ s15)


def _words(block: bytes):
    if len(block) < _BLOCK_LEN:
        block = block + bytes(_BLOCK_LEN - len(block))
    return [int.from_bytes(block[i:i + 4], "little") for i in range(0, _BLOCK_LEN, 4)]


class _Output:
    __slots__ = ("cv", "m", "counter", "block_len", "flags")

    def __init__(self, cv, m, counter, block_len, flags):
        self.cv, self.m, self.counter, self.block_len, self.flags = cv, m, counter, block_len, flags

    def chaining_value(self):
        return _compress(self.cv, self.m, self.counter, self.block_len, self.flags)

    def root(self) -> bytes:
        out = _compress(self.cv, self.m, 0, self.block_len, self.flags | _ROOT)
        return b"".join(w.to_bytes(4, "little") for w in out)


def _chunk_output(key, chunk: bytes, index: int, base: int) -> _Output:
    cv = key
    blocks = [chunk[i:i + _BLOCK_LEN] for i in range(0, len(chunk), _BLOCK_LEN)] or [b""]
    for bi, block in enumerate(blocks):
        flags = base | (_CHUNK_START if bi == 0 else 0)
        if bi == len(blocks) - 1:
            return _Output(cv, _words(block), index, len(block), flags | _CHUNK_END)
        cv = _compress(cv, _words(block), index, _BLOCK_LEN, flags)
    raise AssertionError("unreachable")


def _parent(key, left, right, base: int) -> _Output:
    return _Output(key, list(left) + list(right), 0, _BLOCK_LEN, base | _PARENT)


def blake3(data: bytes, key: bytes | None = None) -> bytes:
    """The 32-byte BLAKE3 hash of data, keyed when key (32 bytes) is given."""
    if key is not None:
        if len(key) != 32:
            raise ValueError("blake3: the key must be 32 bytes")
        kw, base = tuple(int.from_bytes(key[i:i + 4], "little") for i in range(0, 32, 4)), _KEYED_HASH
    else:
        kw, base = _IV, 0
    data = bytes(data)
    n = max(1, -(-len(data) // _CHUNK_LEN))
    stack = []
    for ci in range(n):
        out = _chunk_output(kw, data[ci * _CHUNK_LEN:(ci + 1) * _CHUNK_LEN], ci, base)
        if ci == n - 1:
            break
        cv = out.chaining_value()
        total = ci + 1
        while total & 1 == 0:
            cv = _parent(kw, stack.pop(), cv, base).chaining_value()
            total >>= 1
        stack.append(cv)
    while stack:
        out = _parent(kw, stack.pop(), out.chaining_value(), base)
    return out.root()
