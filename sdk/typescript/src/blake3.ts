// BLAKE3 (hash and keyed hash, 32-byte output), as the reader of a record
// needs it: the id is BLAKE3-256 of the header's bytes, the body digest
// BLAKE3 of the body keyed with the salt (docs/design.md, Records). It
// follows the specification's reference implementation, written for what
// a reader does most: one short message (a header, a body: a few blocks
// of one chunk) in a process that may read only a few records, so that
// code still interpreted, not yet compiled, costs what it costs. The
// compression keeps its state and the message in locals and allocates
// nothing. Checked against records/testdata/vectors.json and the Go
// module's BLAKE3 by the tests.

const IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const CHUNK_START = 1, CHUNK_END = 2, PARENT = 4, ROOT = 8, KEYED_HASH = 16;
const BLOCK_LEN = 64, CHUNK_LEN = 1024;

/**
 * compress compresses the block of 16 words m into the chaining value cv
 * (8 words), in place: counter is the chunk's index, blockLen the bytes
 * of the block, flags the domain flags.
 */
function compress(cv: Int32Array, m: Int32Array, counter: number, blockLen: number, flags: number): void {
  let s0 = cv[0], s1 = cv[1], s2 = cv[2], s3 = cv[3], s4 = cv[4], s5 = cv[5], s6 = cv[6], s7 = cv[7];
  let s8 = IV[0] | 0, s9 = IV[1] | 0, s10 = IV[2] | 0, s11 = IV[3] | 0;
  let s12 = counter | 0, s13 = Math.floor(counter / 0x100000000) | 0, s14 = blockLen, s15 = flags;
  let m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7];
  let m8 = m[8], m9 = m[9], m10 = m[10], m11 = m[11], m12 = m[12], m13 = m[13], m14 = m[14], m15 = m[15];
  let t: number;
  for (let r = 0; r < 7; r++) {
    // Columns.
    s0 = (s0 + s4 + m0) | 0; t = s12 ^ s0; s12 = (t >>> 16) | (t << 16);
    s8 = (s8 + s12) | 0; t = s4 ^ s8; s4 = (t >>> 12) | (t << 20);
    s0 = (s0 + s4 + m1) | 0; t = s12 ^ s0; s12 = (t >>> 8) | (t << 24);
    s8 = (s8 + s12) | 0; t = s4 ^ s8; s4 = (t >>> 7) | (t << 25);
    s1 = (s1 + s5 + m2) | 0; t = s13 ^ s1; s13 = (t >>> 16) | (t << 16);
    s9 = (s9 + s13) | 0; t = s5 ^ s9; s5 = (t >>> 12) | (t << 20);
    s1 = (s1 + s5 + m3) | 0; t = s13 ^ s1; s13 = (t >>> 8) | (t << 24);
    s9 = (s9 + s13) | 0; t = s5 ^ s9; s5 = (t >>> 7) | (t << 25);
    s2 = (s2 + s6 + m4) | 0; t = s14 ^ s2; s14 = (t >>> 16) | (t << 16);
    s10 = (s10 + s14) | 0; t = s6 ^ s10; s6 = (t >>> 12) | (t << 20);
    s2 = (s2 + s6 + m5) | 0; t = s14 ^ s2; s14 = (t >>> 8) | (t << 24);
    s10 = (s10 + s14) | 0; t = s6 ^ s10; s6 = (t >>> 7) | (t << 25);
    s3 = (s3 + s7 + m6) | 0; t = s15 ^ s3; s15 = (t >>> 16) | (t << 16);
    s11 = (s11 + s15) | 0; t = s7 ^ s11; s7 = (t >>> 12) | (t << 20);
    s3 = (s3 + s7 + m7) | 0; t = s15 ^ s3; s15 = (t >>> 8) | (t << 24);
    s11 = (s11 + s15) | 0; t = s7 ^ s11; s7 = (t >>> 7) | (t << 25);
    // Diagonals.
    s0 = (s0 + s5 + m8) | 0; t = s15 ^ s0; s15 = (t >>> 16) | (t << 16);
    s10 = (s10 + s15) | 0; t = s5 ^ s10; s5 = (t >>> 12) | (t << 20);
    s0 = (s0 + s5 + m9) | 0; t = s15 ^ s0; s15 = (t >>> 8) | (t << 24);
    s10 = (s10 + s15) | 0; t = s5 ^ s10; s5 = (t >>> 7) | (t << 25);
    s1 = (s1 + s6 + m10) | 0; t = s12 ^ s1; s12 = (t >>> 16) | (t << 16);
    s11 = (s11 + s12) | 0; t = s6 ^ s11; s6 = (t >>> 12) | (t << 20);
    s1 = (s1 + s6 + m11) | 0; t = s12 ^ s1; s12 = (t >>> 8) | (t << 24);
    s11 = (s11 + s12) | 0; t = s6 ^ s11; s6 = (t >>> 7) | (t << 25);
    s2 = (s2 + s7 + m12) | 0; t = s13 ^ s2; s13 = (t >>> 16) | (t << 16);
    s8 = (s8 + s13) | 0; t = s7 ^ s8; s7 = (t >>> 12) | (t << 20);
    s2 = (s2 + s7 + m13) | 0; t = s13 ^ s2; s13 = (t >>> 8) | (t << 24);
    s8 = (s8 + s13) | 0; t = s7 ^ s8; s7 = (t >>> 7) | (t << 25);
    s3 = (s3 + s4 + m14) | 0; t = s14 ^ s3; s14 = (t >>> 16) | (t << 16);
    s9 = (s9 + s14) | 0; t = s4 ^ s9; s4 = (t >>> 12) | (t << 20);
    s3 = (s3 + s4 + m15) | 0; t = s14 ^ s3; s14 = (t >>> 8) | (t << 24);
    s9 = (s9 + s14) | 0; t = s4 ^ s9; s4 = (t >>> 7) | (t << 25);
    // The message permutation: 2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8.
    const p0 = m0, p1 = m1, p4 = m4, p5 = m5, p8 = m8, p9 = m9, p12 = m12;
    m0 = m2; m1 = m6; m2 = m3; m3 = m10; m4 = m7; m5 = p0; m6 = p4; m7 = m13;
    m8 = p1; m9 = m11; m10 = p12; m11 = p5; m12 = p9; m13 = m14; m14 = m15; m15 = p8;
  }
  cv[0] = s0 ^ s8; cv[1] = s1 ^ s9; cv[2] = s2 ^ s10; cv[3] = s3 ^ s11;
  cv[4] = s4 ^ s12; cv[5] = s5 ^ s13; cv[6] = s6 ^ s14; cv[7] = s7 ^ s15;
}

/** words reads the little-endian words of data[off:end] (at most 64 bytes) into m, zeros after. */
function words(m: Int32Array, data: Uint8Array, off: number, end: number): void {
  let i = 0;
  for (; off + 4 <= end; off += 4) m[i++] = data[off] | (data[off + 1] << 8) | (data[off + 2] << 16) | (data[off + 3] << 24);
  if (off < end) {
    let w = 0;
    for (let k = 0; off + k < end; k++) w |= data[off + k] << (8 * k);
    m[i++] = w;
  }
  while (i < 16) m[i++] = 0;
}

/**
 * chunk compresses every block of the chunk data[start:end] but the
 * last into cv, reads the last into m, and returns its length and flags.
 */
function chunk(cv: Int32Array, m: Int32Array, data: Uint8Array, start: number, end: number, index: number, base: number): [number, number] {
  let flags = base | CHUNK_START;
  let off = start;
  for (; end - off > BLOCK_LEN; off += BLOCK_LEN) {
    words(m, data, off, off + BLOCK_LEN);
    compress(cv, m, index, BLOCK_LEN, flags);
    flags = base;
  }
  words(m, data, off, end);
  return [end - off, flags | CHUNK_END];
}

/** blake3 returns the 32-byte BLAKE3 hash of data, keyed when key (32 bytes) is given. */
export function blake3(data: Uint8Array, key?: Uint8Array): Uint8Array {
  const kw = new Int32Array(8);
  let base = 0;
  if (key) {
    if (key.length !== 32) throw new Error("blake3: the key must be 32 bytes");
    for (let i = 0; i < 8; i++) kw[i] = key[4 * i] | (key[4 * i + 1] << 8) | (key[4 * i + 2] << 16) | (key[4 * i + 3] << 24);
    base = KEYED_HASH;
  } else kw.set(IV);
  const cv = kw.slice();
  const m = new Int32Array(16);
  const size = data.length;
  if (size <= CHUNK_LEN) {
    const [n, flags] = chunk(cv, m, data, 0, size, 0, base);
    compress(cv, m, 0, n, flags | ROOT);
    return bytesOf(cv);
  }
  // The tree: a stack of the chaining values of complete subtrees.
  const chunks = Math.ceil(size / CHUNK_LEN);
  const stack: Int32Array[] = [];
  for (let ci = 0; ci < chunks - 1; ci++) {
    const c = kw.slice();
    const [n, flags] = chunk(c, m, data, ci * CHUNK_LEN, (ci + 1) * CHUNK_LEN, ci, base);
    compress(c, m, ci, n, flags);
    let cvNow: Int32Array = c;
    for (let total = ci + 1; (total & 1) === 0; total >>= 1) cvNow = parent(kw, stack.pop()!, cvNow, base, false);
    stack.push(cvNow);
  }
  const ci = chunks - 1;
  const [n, flags] = chunk(cv, m, data, ci * CHUNK_LEN, size, ci, base);
  // The last chunk's output, then its parents up to the root: only the
  // root's compression has the flag.
  compress(cv, m, ci, n, flags);
  let right: Int32Array = cv;
  while (stack.length > 1) right = parent(kw, stack.pop()!, right, base, false);
  return bytesOf(parent(kw, stack.pop()!, right, base, true));
}

/** parent returns the chaining value of the parent of left and right. */
function parent(kw: Int32Array, left: Int32Array, right: Int32Array, base: number, root: boolean): Int32Array {
  const m = new Int32Array(16);
  m.set(left, 0);
  m.set(right, 8);
  const cv = kw.slice();
  compress(cv, m, 0, BLOCK_LEN, base | PARENT | (root ? ROOT : 0));
  return cv;
}

function bytesOf(cv: Int32Array): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 8; i++) {
    const w = cv[i];
    out[4 * i] = w;
    out[4 * i + 1] = w >>> 8;
    out[4 * i + 2] = w >>> 16;
    out[4 * i + 3] = w >>> 24;
  }
  return out;
}
