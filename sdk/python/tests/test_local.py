"""The page's snippet with nothing set up: no SPL_URL and no token, the
SDK starts spl serve on the data directory through the spl binary, and
authenticates with the credentials that server created there."""

import asyncio
import os
import shutil
import signal
import tempfile
import unittest
from unittest import mock

import spl

BIN = os.environ.get("SPL_BIN")


@unittest.skipUnless(BIN, "set SPL_BIN to the built spl binary")
class LocalTest(unittest.IsolatedAsyncioTestCase):
    async def test_starts_and_joins_the_local_spl(self):
        parent = tempfile.mkdtemp()
        home = os.path.join(parent, "spl")  # not there yet: spl makes it
        env = {k: v for k, v in os.environ.items() if k not in ("SPL_URL", "SPL_TOKEN")}
        env.update(SPL_HOME=home, SPL_BIN=BIN, SPL_ACTOR="did:sync:agent:dev")
        try:
            with mock.patch.dict(os.environ, env, clear=True):
                client = await spl.connect()
                self.assertEqual(os.stat(home).st_mode & 0o777, 0o700, "the data directory spl made")
                try:
                    await client.emit(act="LEARN", kind="agent.session.checkpoint",
                        body={"summary": "Completed auth refactor", "learnings": ["mutex pattern worked"],
                              "next_steps": "Write migration tests"},
                        thread="th_local")
                finally:
                    await client.close()
                # A second session joins the server the first one started.
                again = await spl.connect()
                try:
                    records = await again.query_thread(thread="th_local")
                    self.assertEqual([r.body.get("summary") for r in records], ["Completed auth refactor"])
                finally:
                    await again.close()
        finally:
            self._stop(home)
            shutil.rmtree(parent, ignore_errors=True)

    @staticmethod
    def _stop(home):
        # The server was started detached, to outlive its session: stop it
        # through its lock file's pid (server.json names it).
        import json
        try:
            with open(os.path.join(home, "server.json")) as f:
                os.kill(json.load(f)["pid"], signal.SIGTERM)
        except (OSError, KeyError, ValueError):
            pass


if __name__ == "__main__":
    unittest.main()
