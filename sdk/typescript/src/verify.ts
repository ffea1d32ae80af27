// Verification of what a reader gets from spl: every record's content id
// and keyed body digest, recomputed from its stored bytes (the canonical
// CBOR envelope {"b": body, "h": header, "s": salt}), as records/ in the
// Go module defines them. A reader's right: no rule of spl lives here.
import { blake3 } from "@noble/hashes/blake3.js";
import { decode } from "cborg";

/** CID prefix of every id: CIDv1, multicodec cbor 0x51, multihash blake3 0x1e, 32 bytes. */
const CID_PREFIX = Uint8Array.of(0x01, 0x51, 0x1e, 0x20);
const B32 = "abcdefghijklmnopqrstuvwxyz234567";

/** Header is a record's decoded header. */
export interface Header {
  v: number;
  act: string;
  kind: string;
  thread: string;
  actor: string;
  ts: number;
  prev: string | null;
  bd: Uint8Array;
}

/** Raised when stored bytes do not verify: the one class of corruption. */
export class CorruptRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CorruptRecordError";
  }
}

/** base32 in lower case without padding (multibase 'b'). */
export function base32(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

/** The id (CIDv1 text) of the binary CID bytes. */
export function cidText(cid: Uint8Array): string {
  return "b" + base32(cid);
}

/** The content id of a header's canonical bytes. */
export function idOfHeader(headerBytes: Uint8Array): string {
  const cid = new Uint8Array(36);
  cid.set(CID_PREFIX, 0);
  cid.set(blake3(headerBytes), 4);
  return cidText(cid);
}

/** The body digest: BLAKE3 of the body's bytes keyed with the 32-byte salt. */
export function bodyDigest(body: Uint8Array, salt: Uint8Array): Uint8Array {
  return blake3(body, { key: salt });
}

/** The end offset of the CBOR data item that starts at off. */
function itemEnd(b: Uint8Array, off: number): number {
  if (off >= b.length) throw new CorruptRecordError("envelope: truncated");
  const ib = b[off];
  const major = ib >> 5;
  const info = ib & 31;
  let n = 0;
  let p = off + 1;
  if (info < 24) n = info;
  else if (info === 24) n = b[p++];
  else if (info === 25) { n = (b[p] << 8) | b[p + 1]; p += 2; }
  else if (info === 26) { n = ((b[p] << 24) >>> 0) + (b[p + 1] << 16) + (b[p + 2] << 8) + b[p + 3]; p += 4; }
  else if (info === 27) {
    let v = 0n;
    for (let i = 0; i < 8; i++) v = (v << 8n) | BigInt(b[p + i]);
    p += 8;
    if (major === 2 || major === 3 || major === 4 || major === 5) {
      if (v > BigInt(b.length)) throw new CorruptRecordError("envelope: length past the end");
      n = Number(v);
    }
  } else throw new CorruptRecordError("envelope: indefinite length or reserved head");
  switch (major) {
    case 0: case 1: case 7: return p;
    case 2: case 3:
      if (p + n > b.length) throw new CorruptRecordError("envelope: string past the end");
      return p + n;
    case 4: for (let i = 0; i < n; i++) p = itemEnd(b, p); return p;
    case 5: for (let i = 0; i < 2 * n; i++) p = itemEnd(b, p); return p;
    default: throw new CorruptRecordError("envelope: tags are not allowed");
  }
}

/** What verifyEnvelope found: the verified header and body. */
export interface Verified {
  id: string;
  header: Header;
  body: Record<string, unknown>;
  bodyBytes: Uint8Array;
  headerBytes: Uint8Array;
}

const decodeOptions = { strict: true, rejectDuplicateMapKeys: true, useMaps: false, allowUndefined: false, allowInfinity: false, allowNaN: false, allowIndefinite: false, tags: [] } as const;

/** decodeBody decodes a body map: a plain object, or a Map when a key is not text. */
function decodeBody(b: Uint8Array): Record<string, unknown> {
  try {
    return decode(b, decodeOptions as never) as Record<string, unknown>;
  } catch (e) {
    if (!/non-string keys/.test((e as Error).message)) throw e;
    return decode(b, { ...decodeOptions, useMaps: true } as never) as Record<string, unknown>;
  }
}

/**
 * verifyEnvelope checks a record's stored bytes: the envelope is a map of
 * exactly "b", "h", "s" (in canonical order), the body digest in the header
 * is BLAKE3 of the body keyed with the salt, and, when wantId is given,
 * the id computed from the header's bytes is wantId. It returns the
 * decoded header and body, or throws CorruptRecordError.
 */
export function verifyEnvelope(env: Uint8Array, wantId?: string): Verified {
  if (env[0] !== 0xa3) throw new CorruptRecordError("envelope: not a map of 3 entries");
  let p = 1;
  const parts: Record<string, [number, number]> = {};
  for (const key of ["b", "h", "s"]) {
    if (env[p] !== 0x61 || env[p + 1] !== key.charCodeAt(0)) throw new CorruptRecordError(`envelope: key ${key} expected`);
    p += 2;
    const end = itemEnd(env, p);
    parts[key] = [p, end];
    p = end;
  }
  if (p !== env.length) throw new CorruptRecordError("envelope: data after the map");
  const bodyBytes = env.subarray(...parts.b);
  const headerBytes = env.subarray(...parts.h);
  const saltItem = env.subarray(...parts.s);
  if (saltItem.length !== 34 || saltItem[0] !== 0x58 || saltItem[1] !== 32) throw new CorruptRecordError("envelope: salt must be 32 bytes");
  const salt = saltItem.subarray(2);
  let h: Record<string, unknown>;
  let body: Record<string, unknown>;
  try {
    h = decode(headerBytes, decodeOptions as never) as Record<string, unknown>;
    body = decodeBody(bodyBytes);
  } catch (e) {
    throw new CorruptRecordError(`envelope: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== "object" || Array.isArray(body) || bodyBytes[0] >> 5 !== 5) throw new CorruptRecordError("body: not a map");
  const bd = h.bd as Uint8Array;
  if (!(bd instanceof Uint8Array) || bd.length !== 32) throw new CorruptRecordError("header: bd must be 32 bytes");
  const got = bodyDigest(bodyBytes, salt);
  if (!equalBytes(got, bd)) throw new CorruptRecordError("body digest does not match the header's bd");
  const id = idOfHeader(headerBytes);
  if (wantId !== undefined && id !== wantId) throw new CorruptRecordError(`id: the header hashes to ${id}, not ${wantId}`);
  const prev = h.prev instanceof Uint8Array ? cidText(h.prev) : null;
  const header: Header = {
    v: Number(h.v), act: String(h.act), kind: String(h.kind), thread: String(h.thread),
    actor: String(h.actor), ts: Number(h.ts), prev, bd,
  };
  return { id, header, body, bodyBytes, headerBytes };
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function fromHex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}
