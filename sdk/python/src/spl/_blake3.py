"""BLAKE3 in pure Python (hash and keyed hash, 32-byte output).

hashlib has no BLAKE3 in Python 3.11, and spl's SDK has no third-party
dependency at run time, so this follows the BLAKE3 specification's
reference implementation. It is checked against records/testdata/vectors.json
(ids and keyed body digests) and against the Go module's BLAKE3 for inputs
of several chunks by the tests.

Speed is what a reader pays for every record it verifies (a header and
a body of a few blocks each), and in pure Python the cost is the number
of operations on ints, which cost about as much on 256 bits as on 32.
So the compression function works on four words at a time, one
per 64-bit lane of an int (see _compress_source), and is written out in
full when the module loads: the seven rounds unrolled, the message words
permuted into local names, no loop, no list indexing, no global lookup.
About 2.4 times the speed of the plain loop it replaces; blake3_pair
hashes a record's header and body together, eight words an operation,
for a fifth less again.
"""

from __future__ import annotations

import struct

_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT, _KEYED_HASH = 1, 2, 4, 8, 16
_BLOCK_LEN, _CHUNK_LEN = 64, 1024

_words = struct.Struct("<16I").unpack
_words_at = struct.Struct("<16I").unpack_from
_key_words = struct.Struct("<8I").unpack
_out_bytes = struct.Struct("<8I").pack


def _compress_source(n: int) -> str:
    """The source of the compression function, doing n compressions (1 or
    2) in one pass: _compress(cv, m, counter, block_len, flags), cv the 8
    words of the chaining value and m the 16 words of the block, returns
    the 8 words of the new chaining value; _compress2 takes the same five
    arguments twice and returns two of them.

    The state's four rows (s0-s3, s4-s7, s8-s11, s12-s15) are each one int
    holding a row's four words in 64-bit lanes (a second compression's in
    lanes 4-7), so that one Python operation does the work of four (or
    eight): G mixes the four columns at once, then, the rows rotated by
    one, two and three lanes, the four diagonals, and the rows go back. A
    sum stays within its lane (a and c are left unmasked between
    additions, a few bits over 32 at most), and a rotation takes its
    input masked to 32 bits a lane: multiplied by 2**32 + 1, a lane holds
    its word twice, and shifted right by r, its low 32 bits are the word
    rotated by r. The message words are shifted to the lanes they take
    once a block."""
    lanes = 4 * n
    lane = hex(sum(0xFFFFFFFF << (64 * i) for i in range(lanes)))
    mult = hex(1 << 32 | 1)
    full = (1 << 64) - 1

    def by_lanes(k: int):  # rotate each row's four lanes by k: lane i takes lane i + k
        down = sum(full << (64 * (4 * g + i)) for g in range(n) for i in range(k, 4))
        up = sum(full << (64 * (4 * g + i)) for g in range(n) for i in range(k))
        return lambda x: (f"{x} >> {64 * k}" if n == 1 else f"({x} & {hex(down)}) >> {64 * k}") + f" | ({x} & {hex(up)}) << {64 * (4 - k)}"

    prefix = ("m", "n")[:n]  # the message words of each compression

    def row(words):  # message words in the lanes of one int
        return " | ".join(f"{p}{w}" if g == 0 and i == 0 else f"{p}{w}_{4 * g + i}"
                          for g, p in enumerate(prefix) for i, w in enumerate(words))

    def mix(x, y):  # G on every lane, message words x and y
        return [f"    a = a + b + ({x}); d = ((d ^ a) & {lane}) * {mult} >> 16 & {lane}",
                f"    c = c + d; b = ((b ^ c) & {lane}) * {mult} >> 12 & {lane}",
                f"    a = a + b + ({y}); d = ((d ^ a) & {lane}) * {mult} >> 8 & {lane}",
                f"    c = c + d; b = ((b ^ c) & {lane}) * {mult} >> 7 & {lane}"]

    def packed(names):  # words in the lanes of one int, in order
        return " | ".join(v if i == 0 else f"{v} << {64 * i}" for i, v in enumerate(names))

    args = ["cv", "m", "counter", "block_len", "flags", "cv_b", "m_b", "counter_b", "block_len_b", "flags_b"][:5 * n]
    lines = [f"def {'_compress' if n == 1 else '_compress2'}({', '.join(args)}):"]
    d = []
    for p, sfx in zip(prefix, ("", "_b")):
        lines += ["    " + ", ".join(f"{p}{i}" for i in range(16)) + f" = m{sfx}",
                  "    " + ", ".join(f"{p}s{i}" for i in range(8)) + f" = cv{sfx}"]
        d += [f"(counter{sfx} & 0xFFFFFFFF)", f"(counter{sfx} >> 32)", f"block_len{sfx}", f"flags{sfx}"]
    lines += [f"    a = {packed([f'{p}s{i}' for p in prefix for i in range(4)])}",
              f"    b = {packed([f'{p}s{i}' for p in prefix for i in range(4, 8)])}",
              f"    c = {hex(sum(w << (64 * i) for i, w in enumerate(_IV[:4] * n)))}",
              f"    d = {packed(d)}"]
    # Each word shifted to the lanes the rounds put it in, once a block.
    shifted, o = set(), list(range(16))
    for _ in range(7):
        for words in (o[0:8:2], o[1:8:2], o[8:16:2], o[9:16:2]):
            shifted.update((g, w, i) for g in range(n) for i, w in enumerate(words) if g or i)
        o = [o[i] for i in _PERM]
    lines += [f"    {prefix[g]}{w}_{4 * g + i} = {prefix[g]}{w} << {64 * (4 * g + i)}" for g, w, i in sorted(shifted)]
    o = list(range(16))  # the message word order of the round
    for _ in range(7):
        lines += mix(row(o[0:8:2]), row(o[1:8:2]))
        lines.append(f"    b = {by_lanes(1)('b')}; c = {by_lanes(2)('c')}; d = {by_lanes(3)('d')}")
        lines += mix(row(o[8:16:2]), row(o[9:16:2]))
        lines.append(f"    b = {by_lanes(3)('b')}; c = {by_lanes(2)('c')}; d = {by_lanes(1)('d')}")
        o = [o[i] for i in _PERM]
    lines += [f"    a = (a ^ c) & {lane}", f"    b = (b ^ d) & {lane}"]
    outs = []
    for g in range(n):
        words = [f"{x} >> {64 * (4 * g + i)} & 0xFFFFFFFF" if 4 * g + i else f"{x} & 0xFFFFFFFF" for x in "ab" for i in range(4)]
        outs.append("(" + ", ".join(words) + ")")
    lines.append("    return " + ", ".join(outs))
    return "\n".join(lines) + "\n"


_ns: dict = {}
exec(compile(_compress_source(1) + _compress_source(2), "<blake3 compress>", "exec"), _ns)
_compress, _compress2 = _ns["_compress"], _ns["_compress2"]


def _chunk(cv, data: bytes, start: int, end: int, index: int, base: int):
    """Compresses every block of the chunk data[start:end] but the last,
    and returns what the last block's compression needs: (cv, words,
    block_len, flags)."""
    flags = base | _CHUNK_START
    off = start
    while end - off > _BLOCK_LEN:
        cv = _compress(cv, _words_at(data, off), index, _BLOCK_LEN, flags)
        flags = base
        off += _BLOCK_LEN
    block = data[off:end]
    n = len(block)
    if n < _BLOCK_LEN:
        block = block + bytes(_BLOCK_LEN - n)
    return cv, _words(block), n, flags | _CHUNK_END


def _key(key: bytes | None) -> tuple:
    """The first chaining value and the flags of a hash, keyed or not."""
    if key is None:
        return _IV, 0
    if len(key) != 32:
        raise ValueError("blake3: the key must be 32 bytes")
    return _key_words(key), _KEYED_HASH


def blake3(data: bytes, key: bytes | None = None) -> bytes:
    """The 32-byte BLAKE3 hash of data, keyed when key (32 bytes) is given."""
    kw, base = _key(key)
    data = bytes(data)
    size = len(data)
    if size <= _CHUNK_LEN:  # one chunk, the root: the usual record
        cv, m, n, flags = _chunk(kw, data, 0, size, 0, base)
        return _out_bytes(*_compress(cv, m, 0, n, flags | _ROOT))
    # The tree: a stack of the chaining values of complete subtrees.
    chunks = -(-size // _CHUNK_LEN)
    stack = []
    for ci in range(chunks - 1):
        cv, m, n, flags = _chunk(kw, data, ci * _CHUNK_LEN, (ci + 1) * _CHUNK_LEN, ci, base)
        cv = _compress(cv, m, ci, n, flags)
        total = ci + 1
        while total & 1 == 0:
            cv = _compress(kw, stack.pop() + cv, 0, _BLOCK_LEN, base | _PARENT)
            total >>= 1
        stack.append(cv)
    ci = chunks - 1
    cv, m, n, flags = _chunk(kw, data, ci * _CHUNK_LEN, size, ci, base)
    # The last chunk's output, then its parents up to the root: the final
    # compression of each is deferred, as only the root's has the flag.
    counter = ci
    while stack:
        right = _compress(cv, m, counter, n, flags)
        cv, m, counter, n, flags = kw, stack.pop() + right, 0, _BLOCK_LEN, base | _PARENT
    return _out_bytes(*_compress(cv, m, counter, n, flags | _ROOT))


def _blocks(data: bytes, base: int) -> list:
    """The blocks of a message of one chunk as (words, block_len, flags),
    the last flagged as the chunk's end and the root."""
    size = len(data)
    out = []
    off = 0
    flags = base | _CHUNK_START
    while size - off > _BLOCK_LEN:
        out.append((_words_at(data, off), _BLOCK_LEN, flags))
        flags = base
        off += _BLOCK_LEN
    n = size - off
    out.append((_words(data[off:] + bytes(_BLOCK_LEN - n)), n, flags | _CHUNK_END | _ROOT))
    return out


def blake3_pair(a: bytes, key_a: bytes | None, b: bytes, key_b: bytes | None) -> tuple:
    """(blake3(a, key_a), blake3(b, key_b)), computed together when both
    fit in one chunk, as a record's header and body do: a block of each
    a pass, about 1.3 times the cost of one block alone."""
    a, b = bytes(a), bytes(b)
    if len(a) > _CHUNK_LEN or len(b) > _CHUNK_LEN:
        return blake3(a, key_a), blake3(b, key_b)
    (cva, basea), (cvb, baseb) = (_key(key_a), _key(key_b))
    ja, jb = _blocks(a, basea), _blocks(b, baseb)
    for i in range(min(len(ja), len(jb))):
        (ma, na, fa), (mb, nb, fb) = ja[i], jb[i]
        cva, cvb = _compress2(cva, ma, 0, na, fa, cvb, mb, 0, nb, fb)
    for m, n, f in ja[len(jb):]:
        cva = _compress(cva, m, 0, n, f)
    for m, n, f in jb[len(ja):]:
        cvb = _compress(cvb, m, 0, n, f)
    return _out_bytes(*cva), _out_bytes(*cvb)
