"""The error answers of spl serve become typed errors (serve/http.go classify)."""

import unittest

from spl import (ConflictError, DiskFullError, InvalidError, RunCancelledError, SplError, UnavailableError)
from spl._errors import error_of


class ErrorOfTest(unittest.TestCase):
    def test_by_status_and_code(self) -> None:
        disk = error_of(507, {"error": "spl/log: disk full: /srv/spl has 0 B free", "code": "disk_full"})
        self.assertIsInstance(disk, DiskFullError)
        self.assertIn("disk full", str(disk))
        self.assertIsInstance(error_of(503, {"error": "append outcome unknown"}), UnavailableError)
        self.assertNotIsInstance(error_of(503, {"error": "x"}), DiskFullError)
        bad = error_of(400, {"error": "kind: bad", "field": "kind", "rule": "a dotted name"})
        self.assertIsInstance(bad, InvalidError)
        self.assertEqual((bad.field, bad.rule), ("kind", "a dotted name"))
        cancel = {"reason": "r", "actor": "a", "request": "q", "clock": 3}
        self.assertIsInstance(error_of(409, {"error": "c", "code": "run_cancelled", "cancel": cancel}), RunCancelledError)
        self.assertIsInstance(error_of(409, {"error": "moved"}), ConflictError)
        other = error_of(418, None)
        self.assertIsInstance(other, SplError)
        self.assertNotIsInstance(other, DiskFullError)


if __name__ == "__main__":
    unittest.main()
