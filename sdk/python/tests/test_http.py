"""The HTTP client's one retry: an idempotent request whose reused
connection failed before any answer goes again; a POST never does, since
it may have landed. A server of a few lines here closes the connection
on the second request of each connection without answering, as a server
closing an idle connection just as it is taken would."""

import asyncio
import unittest

from spl._http import HTTP


class ClosingServer:
    def __init__(self):
        self.requests: list[str] = []

    async def handle(self, reader, writer):
        served = 0
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            line = head.split(b"\r\n", 1)[0].decode()
            self.requests.append(line)
            length = 0
            for h in head.split(b"\r\n")[1:]:
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            if length:
                await reader.readexactly(length)
            served += 1
            if served == 2:
                break  # closed with no answer
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()


class RetryTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.srv = ClosingServer()
        self.server = await asyncio.start_server(self.srv.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.http = HTTP(f"http://127.0.0.1:{port}")

    async def asyncTearDown(self):
        self.server.close()
        await self.server.wait_closed()

    async def test_get_sent_again(self):
        self.assertEqual((await self.http.request("GET", "/a")).status, 200)
        r = await self.http.request("GET", "/b")  # the reused connection closes unanswered
        self.assertEqual(r.status, 200)
        self.assertEqual(self.srv.requests, ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /b HTTP/1.1"])

    async def test_post_not_sent_again(self):
        self.assertEqual((await self.http.request("GET", "/a")).status, 200)
        with self.assertRaises((ConnectionError, asyncio.IncompleteReadError, OSError)):
            await self.http.request("POST", "/v1/records/batch", b"{}")
        self.assertEqual(self.srv.requests, ["GET /a HTTP/1.1", "POST /v1/records/batch HTTP/1.1"])


if __name__ == "__main__":
    unittest.main()
