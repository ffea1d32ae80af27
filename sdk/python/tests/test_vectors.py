import json
import os
import unittest

from spl._blake3 import blake3, blake3_pair
from spl._verify import CorruptRecordError, body_digest, id_of_header, verify_envelope

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "..", "..", "..", "records", "testdata", "vectors.json")) as f:
    VECTORS = json.load(f)["vectors"]

# BLAKE3 of bytes i % 251 (plain, then keyed with bytes 0..31), from the Go
# module's github.com/zeebo/blake3: inputs past one chunk check the tree.
GO_BLAKE3 = """
0 af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262 73492b19995d71cdb1e9d74decc09809eb732f1b00bc95c27cb15f9dd4d6478f
1 2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213 d08b45c6b127ee94f3f8527a0b82a5f80be1695a0eaec6022e772c0eb95a7e8b
1023 10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11 da1f18069871512af22af9f13dc005800dfd52c55f42753b5ae718086fe2ee44
1024 42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7 f45a9249a627fdf1fcf13c0e6376f6a9a9b2056d6e1b5693a4b119a3453665f9
1025 d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444 82223147a9b804a0c3f9a921b8d8aee250d1a51bb76be72152e6d5e8f27349b3
2048 e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a 636bfa717d4f9fc3e59da9b2e5cce6a2b78eb70469c0fce49da38b5419892423
3073 7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3 66eabf3a0a1a262221ee9eed633621a5065e4e73d098277c7de4162559edb9b4
5000 ee78d92070de3df1c57c37002abf0a6b1a6589acdeef4d8ffac7cf3d9e8f2836 3742909929a310dec551d9163c279136d6506f289f75c283c5df101108cd09e5
8193 bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b c666ccf5fa240c07a9d0a6b8ae92c67668b482e7c2751fb5e1d9d7078fa9637e
"""


class Vectors(unittest.TestCase):
    def test_vectors(self):
        self.assertGreater(len(VECTORS), 20)
        for v in VECTORS:
            with self.subTest(v["name"]):
                self.assertEqual(id_of_header(bytes.fromhex(v["header_hex"])), v["id"])
                self.assertEqual(body_digest(bytes.fromhex(v["body_hex"]), bytes.fromhex(v["salt_hex"])).hex(), v["bd_hex"])
                got = verify_envelope(bytes.fromhex(v["envelope_hex"]), v["id"])
                self.assertEqual(got["header_bytes"].hex(), v["header_hex"])
                self.assertEqual(got["body_bytes"].hex(), v["body_hex"])
                for k in ("act", "kind", "thread", "actor", "ts"):
                    self.assertEqual(got["header"][k], v["header"][k])
                self.assertEqual(got["header"]["prev"], v["header"].get("prev"))

    def test_refuses_changes(self):
        v = VECTORS[0]
        env = bytearray.fromhex(v["envelope_hex"])
        env[env.index(b"hello")] ^= 1
        with self.assertRaises(CorruptRecordError):
            verify_envelope(bytes(env), v["id"])
        with self.assertRaises(CorruptRecordError):
            verify_envelope(bytes.fromhex(v["envelope_hex"]), VECTORS[1]["id"])

    def test_blake3_tree(self):
        for line in GO_BLAKE3.strip().splitlines():
            n, plain, keyed = line.split()
            data = bytes(i % 251 for i in range(int(n)))
            self.assertEqual(blake3(data).hex(), plain, n)
            self.assertEqual(blake3(data, bytes(range(32))).hex(), keyed, n)

    def test_blake3_pair(self):
        # Two hashes in one pass give what each gives alone, keyed or not,
        # for every pair of lengths around the block and chunk bounds.
        go = {int(n): (plain, keyed) for n, plain, keyed in (line.split() for line in GO_BLAKE3.strip().splitlines())}
        key = bytes(range(32))
        sizes = (0, 1, 63, 64, 65, 127, 128, 129, 500, 1023, 1024, 1025, 2048)
        for na in sizes:
            for nb in sizes:
                a, b = bytes(i % 251 for i in range(na)), bytes((7 * i) % 256 for i in range(nb))
                for ka, kb in ((None, None), (key, None), (None, key), (key, key)):
                    self.assertEqual(blake3_pair(a, ka, b, kb), (blake3(a, ka), blake3(b, kb)), (na, nb, ka is None, kb is None))
                if na in go:
                    self.assertEqual(blake3_pair(a, None, b, key)[0].hex(), go[na][0], na)
                    self.assertEqual(blake3_pair(b, None, a, key)[1].hex(), go[na][1], na)


if __name__ == "__main__":
    unittest.main()
