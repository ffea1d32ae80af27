"""The page's snippet with nothing set up: no SPL_URL and no token, the
SDK starts spl serve on the data directory through the spl binary, and
authenticates with the credentials that server created there."""

import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
import unittest
from unittest import mock

import spl
from spl._local import ADDR_FILE, local_token, proof

BIN = os.environ.get("SPL_BIN")
HERE = os.path.dirname(__file__)


class ProofTest(unittest.TestCase):
    def test_vectors(self):
        # The server's own vectors: the SDK computes the same proof.
        with open(os.path.join(HERE, "..", "..", "..", "serve", "testdata", "proof.json")) as f:
            vectors = json.load(f)["vectors"]
        self.assertTrue(vectors)
        for v in vectors:
            self.assertEqual(proof(v["token"], v["challenge"]), v["proof"])


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

    async def test_never_sends_the_token_to_a_stranger_on_the_port(self):
        # The server of home dies with -9, leaving its address file; a
        # stranger takes the port and answers /healthz like spl would. The
        # SDK must not send it the token: it starts a server of its own.
        parent = tempfile.mkdtemp()
        home = os.path.join(parent, "spl")
        env = {k: v for k, v in os.environ.items() if k not in ("SPL_URL", "SPL_TOKEN")}
        env.update(SPL_HOME=home, SPL_BIN=BIN, SPL_ACTOR="did:sync:agent:dev")
        seen: list[bytes] = []

        async def stranger(reader, writer):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                seen.append(head)
                body = b'{"status":"ok","last_clock":0}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Spl-Proof: %s\r\n\r\n%s" % (len(body), b"0" * 64, body))
                await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        try:
            with mock.patch.dict(os.environ, env, clear=True):
                client = await spl.connect()
                try:
                    await client.emit(act="LEARN", kind="agent.session.checkpoint",
                                      body={"summary": "before the kill", "learnings": ["a kill leaves the address file"]},
                                      thread="th_kill")
                finally:
                    await client.close()
                self._stop(home, signal.SIGKILL)
                with open(os.path.join(home, ADDR_FILE)) as f:
                    host, port = f.read().strip().rsplit(":", 1)
                token = local_token(home)
                self.assertTrue(token)
                server = None
                for _ in range(100):  # the port frees once the killed server is gone
                    try:
                        server = await asyncio.start_server(stranger, host, int(port))
                        break
                    except OSError:
                        await asyncio.sleep(0.05)
                self.assertIsNotNone(server, "could not take the dead server's port")
                try:
                    again = await spl.connect()
                    try:
                        records = await again.query_thread(thread="th_kill")
                        self.assertEqual([r.body.get("summary") for r in records], ["before the kill"])
                    finally:
                        await again.close()
                finally:
                    server.close()
                    await server.wait_closed()
                self.assertTrue(seen, "the SDK never probed the address it found")
                for head in seen:
                    self.assertNotIn(token.encode(), head)
                    self.assertNotIn(b"authorization", head.lower())
        finally:
            self._stop(home)
            shutil.rmtree(parent, ignore_errors=True)

    @staticmethod
    def _stop(home, sig=signal.SIGTERM):
        # The server was started detached, to outlive its session: stop it
        # through its lock file's pid (server.json names it).
        try:
            with open(os.path.join(home, "server.json")) as f:
                pid = json.load(f)["pid"]
            os.kill(pid, sig)
        except (OSError, KeyError, ValueError):
            return
        for _ in range(200):  # gone, so its port and its lock are free
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.025)


if __name__ == "__main__":
    unittest.main()
