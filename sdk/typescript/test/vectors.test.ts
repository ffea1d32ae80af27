import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { bodyDigest, CorruptRecordError, fromHex, hex, idOfHeader, verifyEnvelope } from "../src/verify.js";

const vectors = JSON.parse(readFileSync(new URL("../../../records/testdata/vectors.json", import.meta.url), "utf8")).vectors as any[];

describe("records/testdata/vectors.json", () => {
  it("has vectors", () => expect(vectors.length).toBeGreaterThan(20));
  for (const v of vectors) {
    it(v.name, () => {
      expect(idOfHeader(fromHex(v.header_hex))).toBe(v.id);
      expect(hex(bodyDigest(fromHex(v.body_hex), fromHex(v.salt_hex)))).toBe(v.bd_hex);
      const got = verifyEnvelope(fromHex(v.envelope_hex), v.id);
      expect(got.id).toBe(v.id);
      expect(hex(got.headerBytes)).toBe(v.header_hex);
      expect(hex(got.bodyBytes)).toBe(v.body_hex);
      for (const k of ["act", "kind", "thread", "actor"]) expect((got.header as any)[k]).toBe(v.header[k]);
      expect(got.header.prev).toBe(v.header.prev ?? null);
    });
  }
  it("refuses a changed body or a wrong id", () => {
    const v = vectors[0];
    const env = fromHex(v.envelope_hex);
    env[env.indexOf(0x68, 4) + 0] ^= 0x01; // a byte of "hello"
    expect(() => verifyEnvelope(env, v.id)).toThrow(CorruptRecordError);
    expect(() => verifyEnvelope(fromHex(v.envelope_hex), vectors[1].id)).toThrow(CorruptRecordError);
  });
});
