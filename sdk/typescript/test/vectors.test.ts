import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { blake3 as nobleBlake3 } from "@noble/hashes/blake3.js";
import { blake3 } from "../src/blake3.js";
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

// BLAKE3 of bytes i % 251 (plain, then keyed with bytes 0..31), from the Go
// module's github.com/zeebo/blake3: inputs past one chunk check the tree.
const GO_BLAKE3 = `
0 af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262 73492b19995d71cdb1e9d74decc09809eb732f1b00bc95c27cb15f9dd4d6478f
1 2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213 d08b45c6b127ee94f3f8527a0b82a5f80be1695a0eaec6022e772c0eb95a7e8b
1023 10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11 da1f18069871512af22af9f13dc005800dfd52c55f42753b5ae718086fe2ee44
1024 42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7 f45a9249a627fdf1fcf13c0e6376f6a9a9b2056d6e1b5693a4b119a3453665f9
1025 d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444 82223147a9b804a0c3f9a921b8d8aee250d1a51bb76be72152e6d5e8f27349b3
2048 e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a 636bfa717d4f9fc3e59da9b2e5cce6a2b78eb70469c0fce49da38b5419892423
3073 7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3 66eabf3a0a1a262221ee9eed633621a5065e4e73d098277c7de4162559edb9b4
5000 ee78d92070de3df1c57c37002abf0a6b1a6589acdeef4d8ffac7cf3d9e8f2836 3742909929a310dec551d9163c279136d6506f289f75c283c5df101108cd09e5
8193 bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b c666ccf5fa240c07a9d0a6b8ae92c67668b482e7c2751fb5e1d9d7078fa9637e
`;

describe("BLAKE3", () => {
  const key = Uint8Array.from({ length: 32 }, (_, i) => i);
  it("matches the Go module's, one chunk and trees of several", () => {
    for (const line of GO_BLAKE3.trim().split("\n")) {
      const [n, plain, keyed] = line.split(" ");
      const data = Uint8Array.from({ length: Number(n) }, (_, i) => i % 251);
      expect(hex(blake3(data)), n).toBe(plain);
      expect(hex(blake3(data, key)), n).toBe(keyed);
    }
  });
  it("matches @noble/hashes for every length around the block and chunk bounds", () => {
    const sizes = [...Array(200).keys(), 511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 7 * 1024 + 5, 16 * 1024 + 1, 33 * 1024];
    for (const n of sizes) {
      const data = Uint8Array.from({ length: n }, (_, i) => (i * 131 + 7) & 255);
      expect(hex(blake3(data)), String(n)).toBe(hex(nobleBlake3(data)));
      expect(hex(blake3(data, key)), String(n)).toBe(hex(nobleBlake3(data, { key })));
    }
  });
});
