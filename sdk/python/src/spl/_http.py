"""A small HTTP/1.1 client on asyncio streams, keep-alive, pooled: the
standard library only (no third-party dependency at run time)."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer


class Response:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body) if self.body else None


class HTTP:
    def __init__(self, url: str, headers: dict | None = None):
        u = urlsplit(url)
        if u.scheme != "http":
            raise ValueError(f"spl: only http:// URLs, got {url!r}")
        self.host, self.port = u.hostname, u.port or 80
        self.base = u.path.rstrip("/")
        self.headers = headers or {}
        self._idle: list[_Conn] = []

    async def _connect(self) -> tuple[_Conn, bool]:
        """An open connection, and whether it was reused from the pool."""
        while self._idle:
            c = self._idle.pop()
            if not c.writer.is_closing() and not c.reader.at_eof():
                return c, True
        r, w = await asyncio.open_connection(self.host, self.port)
        return _Conn(r, w), False

    async def _send(self, c: _Conn, method: str, path: str, body: bytes | None, headers: dict):
        h = {"Host": f"{self.host}:{self.port}", **self.headers, **headers}
        if body is not None:
            h["Content-Length"] = str(len(body))
        head = f"{method} {self.base}{path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        c.writer.write(head.encode("latin-1") + (body or b""))
        await c.writer.drain()

    async def _head(self, c: _Conn):
        # The status line and the headers in one read: one wait for the
        # answer, not one a line.
        try:
            head = await c.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise ConnectionResetError("spl: server closed the connection") from None
            raise
        except asyncio.LimitOverrunError:
            # Not a connection failure: sending again would not help.
            raise ValueError("spl: answer headers over the reader's limit") from None
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        return status, headers

    async def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Response:
        while True:
            c, reused = await self._connect()
            try:
                await self._send(c, method, path, body, headers or {})
                status, h = await self._head(c)
                break
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                c.writer.close()
                # A reused connection that failed before any answer came:
                # the server may have closed it as it was taken, so an
                # idempotent request goes again, on the next connection
                # (a new one once the pool is spent). Anything else is the
                # caller's, as in the TypeScript SDK: an append that
                # failed may or may not have landed, and sending it again
                # could store it twice.
                if reused and method in ("GET", "PUT", "DELETE"):
                    continue
                raise
            except BaseException:
                # Cancelled (or anything else) midway: the connection is in
                # an unknown state, and goes.
                c.writer.close()
                raise
        try:
            return await self._body(c, status, h)
        except BaseException:
            c.writer.close()
            raise

    async def _body(self, c: _Conn, status: int, h: dict) -> Response:
        """Reads the answer's body; the connection goes back to the pool
        unless the server closes it."""
        if h.get("transfer-encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int((await c.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await c.reader.readline()
                    break
                data += await c.reader.readexactly(size)
                await c.reader.readexactly(2)
            data = bytes(data)
        elif "content-length" in h:
            data = await c.reader.readexactly(int(h["content-length"]))
        else:
            data = await c.reader.read()
            c.writer.close()
            return Response(status, h, data)
        if h.get("connection", "").lower() == "close":
            c.writer.close()
        else:
            self._idle.append(c)
        return Response(status, h, data)

    async def stream(self, path: str, headers: dict):
        """Opens a streaming GET (SSE); yields decoded lines until the server ends it."""
        r, w = await asyncio.open_connection(self.host, self.port)
        c = _Conn(r, w)
        try:
            await self._send(c, "GET", path, None, headers)
            status, h = await self._head(c)
            if status != 200:
                body = await r.read()
                if h.get("transfer-encoding", "").lower() == "chunked":
                    body = body.split(b"\r\n", 1)[1].rsplit(b"\r\n0\r\n", 1)[0]
                yield ("error", status, body)
                return
            chunked = h.get("transfer-encoding", "").lower() == "chunked"
            buf = b""
            while True:
                if chunked:
                    line = await r.readline()
                    if not line:
                        return
                    size = int(line.split(b";")[0], 16)
                    if size == 0:
                        return
                    buf += await r.readexactly(size)
                    await r.readexactly(2)
                else:
                    part = await r.read(65536)
                    if not part:
                        return
                    buf += part
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    yield ("line", line.decode("utf-8"), None)
        finally:
            w.close()

    async def close(self):
        for c in self._idle:
            c.writer.close()
        self._idle.clear()
