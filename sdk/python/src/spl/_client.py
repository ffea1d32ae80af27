"""The client of spl serve's HTTP API (docs/http-api.yaml). It holds no rule
of spl: every request goes to the server, which applies them once (the Go
service layer). What it adds is the reader's check: every record it returns
has been verified against its stored bytes (id and keyed body digest)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any
from urllib.parse import quote, urlencode

from ._errors import SplError, error_of
from ._http import HTTP
from ._local import local_token, local_url
from ._run import Run, RunHandle, _dumps, post_run
from ._verify import CorruptRecordError, verify_envelope

_HEADER_FIELDS = ("thread", "act", "kind", "actor", "ts", "prev")

# Bounds of one batch. The server takes at most 1000 records and 2 MiB a
# request; a batch is cut once it holds half that much record JSON, so that
# no batch is refused whole for its size, with room to spare. A record
# larger than that goes alone.
_MAX_BATCH_RECORDS = 1000
_MAX_BATCH_BYTES = 1 << 20


class Record:
    """A verified record. ``stored_body`` is the body exactly as stored
    (decoded from the bytes whose digest was checked). ``body`` is the same
    plus ``kind`` mirrored from the header when the stored body has no
    ``kind`` of its own, so that the session-checkpoints page's filter
    ``r.body.get("kind") == "agent.session.checkpoint"`` works: in spl the
    kind is in the header. ``derived_body_keys`` names what ``body`` adds."""

    __slots__ = ("id", "clock", "thread", "act", "kind", "actor", "time", "ts", "prev", "stored_body", "verified", "extra", "_body")

    def __init__(self, j: dict, verified: dict | None):
        j = dict(j)
        j.pop("envelope", None)
        for k in ("id", "clock", "thread", "act", "kind", "actor", "time", "ts", "prev"):
            setattr(self, k, j.pop(k, None))
        body = j.pop("body", None)
        self.stored_body = verified["body"] if verified else body
        self.verified = verified is not None
        self.extra = j  # a checkpoint's summary, learnings, next_steps, ...
        self._body = None

    @property
    def derived_body_keys(self) -> list:
        return [] if "kind" in self.stored_body else ["kind"]

    @property
    def body(self) -> dict:
        if self._body is None:
            self._body = self.stored_body if "kind" in self.stored_body else {**self.stored_body, "kind": self.kind}
        return self._body

    def __getitem__(self, k):
        return getattr(self, k) if k in self.__slots__ else self.extra[k]

    def __repr__(self):
        return f"Record(id={self.id!r}, clock={self.clock}, thread={self.thread!r}, kind={self.kind!r})"


class Client:
    """Client of one spl serve. Safe for concurrent use from one event loop.

    With ``coalesce`` (the default), the emits awaited at the same moment
    (before the event loop turns) go to the server as one request (POST
    /v1/records/batch); each still returns its own record once it is
    durable, or raises its own error. ``coalesce=False`` sends one request
    an emit (a server older than the batch route)."""

    def __init__(self, url: str, token: str | None = None, actor: str | None = None, max_in_flight: int = 64,
                 coalesce: bool = True):
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url, self.actor = url.rstrip("/"), actor
        self._http = HTTP(self.url, headers)
        self._sem = asyncio.Semaphore(max_in_flight)
        self._pending: set = set()
        self._failures: list = []
        self._coalesce = coalesce
        self._queued: list = []  # (item, future) of the emits of this moment
        self._sending: set = set()  # tasks sending them

    async def request(self, method: str, path: str, body=None, query: dict | None = None):
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        return await self._send(method, path, data, query)

    async def _send(self, method: str, path: str, data: bytes | None, query: dict | None = None):
        """request with the body's JSON bytes."""
        if query:
            q = []
            for k, v in query.items():
                if v is None:
                    continue
                for x in (v if isinstance(v, (list, tuple)) else [v]):
                    q.append((k, str(x).lower() if isinstance(x, bool) else str(x)))
            if q:
                path += "?" + urlencode(q)
        r = await self._http.request(method, path, data, {"Content-Type": "application/json"} if data is not None else {})
        try:
            j = r.json()
        except ValueError:
            j = {"error": r.body.decode("utf-8", "replace")}
        if r.status >= 400:
            raise error_of(r.status, j)
        return j

    def _verify(self, j: dict) -> Record:
        env = j.get("envelope")
        if not isinstance(env, str):
            raise CorruptRecordError(f"record {j.get('id')}: the server sent no envelope to verify")
        v = verify_envelope(base64.b64decode(env), j["id"])
        for k in _HEADER_FIELDS:
            if v["header"].get(k) != j.get(k):
                raise CorruptRecordError(f"record {j['id']}: {k} is {j.get(k)!r} in the answer, {v['header'].get(k)!r} in the verified header")
        return Record(j, v)

    @staticmethod
    def _t(thread: str, rest: str) -> str:
        return f"/v1/threads/{quote(thread, safe='')}/{rest}"

    async def emit(self, *, act: str, kind: str, body: dict, thread: str, actor: str | None = None, ts: int | None = None,
                   expected_clock: int | None = None) -> Record:
        """Appends one record; returns once it is durable (fsynced). The
        emits of one moment go as one request (see Client); each raises
        its own error (InvalidError naming the field and rule), and the
        records of one thread land in the order of the calls. With
        expected_clock, the record lands only while the thread's newest
        record is at that clock (0: the thread has none); else
        ConflictError, whose clock is where the thread is."""
        req = {"thread": thread, "act": act, "kind": kind, "actor": actor or self.actor, "body": body}
        if ts is not None:
            req["ts"] = ts
        if expected_clock is not None:
            req["expected_clock"] = expected_clock
        if not self._coalesce:
            return Record(await self.request("POST", "/v1/records", req), None)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queued.append((req, fut))
        if len(self._queued) == 1:
            loop.call_soon(self._send_queued)
        return await fut

    def _send_queued(self) -> None:
        """Sends the emits of the moment: one alone, more in batches within
        the server's bounds, one request after the other."""
        q, self._queued = self._queued, []
        batches, cur, size = [], [], 0
        for req, fut in q:
            if fut.done():  # its caller was cancelled before it was sent
                continue
            try:
                # A value JSON cannot hold (NaN) fails alone, as it would
                # on its own: the server answers a request it cannot read.
                text = _dumps(req)
            except ValueError:
                batches.append([(req, fut, None)])
                continue
            except Exception as e:  # a value json cannot encode at all
                fut.set_exception(e)
                continue
            if "expected_clock" in req:
                # A conditional append goes alone (a batch does not take
                # one), in its place among the others.
                if cur:
                    batches.append(cur)
                    cur, size = [], 0
                batches.append([(req, fut, text)])
                continue
            if len(cur) == _MAX_BATCH_RECORDS or (cur and size + len(text) + 1 > _MAX_BATCH_BYTES):
                batches.append(cur)
                cur, size = [], 0
            cur.append((req, fut, text))
            size += len(text) + 1
        if cur:
            batches.append(cur)
        t = asyncio.ensure_future(self._send_batches(batches))
        self._sending.add(t)
        t.add_done_callback(self._sending.discard)

    async def _send_batches(self, batches: list) -> None:
        try:
            for batch in batches:
                if len(batch) == 1:
                    req, fut, text = batch[0]
                    try:
                        r = Record(await (self._send("POST", "/v1/records", text) if text is not None else
                                          self.request("POST", "/v1/records", req)), None)
                    except Exception as e:
                        _settle(fut, exc=e)
                    else:
                        _settle(fut, r)
                    continue
                try:
                    j = await self._send("POST", "/v1/records/batch", b'{"records":[' + b",".join(t for _, _, t in batch) + b"]}")
                    results = j.get("results") if isinstance(j, dict) else None
                except Exception as e:
                    for _, fut, _ in batch:
                        _settle(fut, exc=e)
                    continue
                for i, (_, fut, _) in enumerate(batch):
                    res = results[i] if isinstance(results, list) and i < len(results) else None
                    if not isinstance(res, dict):
                        _settle(fut, exc=SplError(500, f"the server answered {len(results or [])} results for a batch of {len(batch)}"))
                    elif res.get("status") == 201 and isinstance(res.get("record"), dict):
                        _settle(fut, Record(res["record"], None))
                    else:
                        _settle(fut, exc=error_of(res.get("status", 500), res))
        finally:
            # Cancelled midway (the loop shutting down): no caller waits forever.
            for batch in batches:
                for _, fut, _ in batch:
                    if not fut.done():
                        fut.cancel()

    def enqueue(self, **event) -> None:
        """Write-behind: queues emit(**event) and returns at once; flush() waits."""
        async def run():
            async with self._sem:
                return await self.emit(**event)
        t = asyncio.ensure_future(run())
        self._pending.add(t)

        def done(f):
            self._pending.discard(f)
            if not f.cancelled() and f.exception() is not None:
                self._failures.append(f.exception())
        t.add_done_callback(done)

    async def emit_many(self, events: list) -> None:
        for ev in events:
            self.enqueue(**ev)
        await self.flush()

    async def flush(self) -> None:
        """Waits until every queued record has landed or failed; raises the first failure."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        if self._failures:
            first, self._failures = self._failures[0], []
            raise first

    async def query_thread(self, *, thread: str, kind: str | None = None, act: str | None = None, from_clock: int | None = None,
                           limit: int | None = None, last: int | None = None, page_size: int = 1000) -> list:
        """The records of a thread in clock order, verified, every page (or at most limit, or the last N)."""
        return [r async for r in self.iter_thread(thread=thread, kind=kind, act=act, from_clock=from_clock, limit=limit, last=last, page_size=page_size)]

    async def iter_thread(self, *, thread: str, kind=None, act=None, from_clock=None, limit=None, last=None, page_size=1000):
        path = self._t(thread, "records")
        if last is not None:
            q = await self.request("GET", path, query={"kind": kind, "act": act, "from": from_clock, "last": last, "envelope": True})
            self._check_corrupt(q)
            for j in q["records"]:
                yield self._verify(j)
            return
        left = limit if limit is not None else float("inf")
        while left > 0:
            q = await self.request("GET", path, query={"kind": kind, "act": act, "from": from_clock, "limit": int(min(page_size, left)), "envelope": True})
            self._check_corrupt(q)
            for j in q["records"]:
                yield self._verify(j)
            left -= len(q["records"])
            if q.get("next") is None:
                return
            from_clock = q["next"]

    @staticmethod
    def _check_corrupt(q):
        if q.get("corrupt"):
            raise CorruptRecordError(f"the server found stored messages that do not verify: {q['corrupt']}")

    async def latest_checkpoint(self, thread: str) -> Record:
        """The newest checkpoint of a thread (NotFoundError when none)."""
        return self._verify(await self.request("GET", self._t(thread, "checkpoint"), query={"envelope": True}))

    async def checkpoint(self, thread: str, *, id: str | None = None, name: str | None = None) -> Record:
        return self._verify(await self.request("GET", self._t(thread, "checkpoint"), query={"id": id, "name": name, "envelope": True}))

    async def list_checkpoints(self, thread: str, *, limit: int | None = None) -> list:
        r = await self.request("GET", self._t(thread, "checkpoints"), query={"limit": limit, "envelope": True})
        return [self._verify(j) for j in r["checkpoints"]]

    async def latest_checkpoints(self, *, limit=None, offset=None, actor=None, since=None) -> list:
        """The latest checkpoint of every thread, newest first (from the index: ids and summaries)."""
        return (await self.request("GET", "/v1/checkpoints/latest", query={"limit": limit, "offset": offset, "actor": actor, "since": since}))["checkpoints"]

    async def record(self, id: str, *, thread: str | None = None) -> Record:
        return self._verify(await self.request("GET", f"/v1/records/{quote(id, safe='')}", query={"thread": thread, "envelope": True}))

    async def record_bytes(self, id: str, *, thread: str | None = None) -> bytes:
        """A record's stored bytes (canonical CBOR), verified against id."""
        path = f"/v1/records/{quote(id, safe='')}" + (f"?thread={quote(thread, safe='')}" if thread else "")
        r = await self._http.request("GET", path, None, {"Accept": "application/cbor"})
        if r.status >= 400:
            raise error_of(r.status, r.json())
        verify_envelope(r.body, id)
        return r.body

    async def follow(self, thread: str, *, from_clock: int | None = None):
        """Yields the records of a thread as they land (SSE), verified; from
        from_clock, else what lands after the call. Reconnects with
        Last-Event-ID. Stop by breaking out of the loop (or cancelling)."""
        last = None
        first = True
        while True:
            headers = {"Accept": "text/event-stream", **{k: v for k, v in self._http.headers.items() if k == "Authorization"}}
            q = {"envelope": "true"}
            if first and from_clock is not None:
                q["from"] = str(from_clock)
            elif last is not None:
                headers["Last-Event-ID"] = str(last)
            first = False
            event, data, eid = "message", "", None
            async for kind, a, b in self._http.stream(self._t(thread, "events") + "?" + urlencode(q), headers):
                if kind == "error":
                    try:
                        j = json.loads(b)
                    except ValueError:
                        j = None
                    raise error_of(a, j)
                line = a
                if line == "":
                    if eid is not None:
                        last = int(eid)
                    if event == "record":
                        yield self._verify(json.loads(data))
                    elif event == "corrupt":
                        raise CorruptRecordError(f"stored message does not verify: {data}")
                    event, data, eid = "message", "", None
                elif line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
                elif line.startswith("id: "):
                    eid = line[4:]
            if last is None:
                last = 0

    # Runs and sessions, lineage: as the HTTP API has them.
    async def runs(self, *, thread=None, status=None) -> list:
        """The runs (GET /v1/runs), of a thread and of a status (running, waiting,
        terminal, failed, cancelled) when given: a list of dicts."""
        return (await self.request("GET", "/v1/runs", query={"thread": thread, "status": status}))["runs"]

    def run(self, run_id: str, *, thread: str | None = None, actor: str | None = None, flush_timeout: float = 5.0,
            outputs: bool = False) -> RunHandle:
        """A run, two ways. Awaited, its detail (GET /v1/runs/{run}: status,
        phases, effects, terminal_result…; with outputs, each effect's
        output), as a dict::

            detail = await client.run("r1", thread="T")

        Entered, the run opened for writing (POST /v1/runs/{run}/open), a
        Run with the promises of the Go SDK's: checkpoints write-behind,
        effects durable and replayed, finish; closed on the way out::

            async with client.run("r1", thread="T") as run:
                ...

        actor (default: the client's) is the actor of what the run writes;
        flush_timeout bounds how long finish and close wait for queued
        checkpoints."""
        return RunHandle(self, run_id, thread, actor, flush_timeout, outputs)

    async def run_detail(self, run_id: str, *, thread: str | None = None, outputs: bool = False) -> dict:
        """The detail of a run (GET /v1/runs/{run}), as ``await client.run(...)`` gives it."""
        return await self.request("GET", f"/v1/runs/{quote(run_id, safe='')}",
                                  query={"thread": thread, "outputs": True if outputs else None})

    async def open_run(self, run_id: str, *, thread: str | None, actor: str | None = None, flush_timeout: float = 5.0) -> Run:
        """Opens run run_id on thread for writing (POST /v1/runs/{run}/open,
        which writes nothing): a new run, or the one found, resumed (see
        Run). Leave it with Run.finish or Run.close (or ``async with``)."""
        body = {} if thread is None else {"thread": thread}
        opened = await post_run(self, f"/v1/runs/{quote(run_id, safe='')}/open", json.dumps(body).encode())
        return Run(self, run_id, thread, actor or self.actor, flush_timeout, opened)

    async def cancel_run(self, run_id: str, *, reason: str, thread: str | None = None, actor: str | None = None) -> dict:
        """Asks a run to stop (POST /v1/runs/{run}/cancel), for reason: its
        runner sees a RunCancelledError at its next checkpoint or effect.
        Answers run_id, request (the cancel record's id) and clock."""
        body = {"reason": reason, "actor": actor or self.actor}
        if thread is not None:
            body["thread"] = thread
        return await self.request("POST", f"/v1/runs/{quote(run_id, safe='')}/cancel", body)

    async def signal_run(self, run_id: str, name: str, *, data: Any = None, thread: str | None = None,
                         actor: str | None = None) -> dict:
        """Sends run run_id the signal name it waits for (POST
        /v1/runs/{run}/signal; as spl run signal), with data (any JSON
        value; None for none), as actor (default: the client's); thread
        when the run id is on several threads. The run is then running
        again, and its runner's await_signal (or the next open's
        ``signal``) has it. Answers run_id, name, request (the
        agent.run.signal record's id) and clock.

        The run must be waiting for name: one that is not (running, or
        waiting for another signal), or a second signal for one wait, is a
        RunNotWaitingError; a finished or cancelled run a
        RunFinishedError; a run with no checkpoint NotFoundError."""
        body: dict[str, Any] = {"name": name}
        if data is not None:
            body["data"] = data
        if actor or self.actor:
            body["actor"] = actor or self.actor
        if thread is not None:
            body["thread"] = thread
        return await self.request("POST", f"/v1/runs/{quote(run_id, safe='')}/signal", body)

    async def sessions(self, *, status=None, resumable=None, offset=None, limit=None) -> dict:
        return await self.request("GET", "/v1/sessions", query={"status": status, "resumable": resumable, "offset": offset, "limit": limit})

    async def pause(self, thread: str, *, actor=None, **opts) -> dict:
        """opts: reason, node, sessionId, agents, budgetSpent, rounds, elapsedMs, depth (the API's names)."""
        return await self.request("POST", self._t(thread, "pause"), {**opts, "actor": actor or self.actor})

    async def resume(self, thread: str, *, actor=None, **opts) -> dict:
        """opts: from (a checkpoint id or name), set (a dict)."""
        return await self.request("POST", self._t(thread, "resume"), {**opts, "actor": actor or self.actor})

    async def lineage(self, thread: str) -> dict:
        return await self.request("GET", self._t(thread, "lineage"))

    async def diff(self, thread: str, a: str, b: str, *, b_thread=None) -> dict:
        return await self.request("GET", self._t(thread, "diff"), query={"a": a, "b": b, "b_thread": b_thread})

    async def fork(self, thread: str, *, to: str, actor=None, **opts) -> dict:
        return await self.request("POST", self._t(thread, "fork"), {"to": to, **opts, "actor": actor or self.actor})

    async def prune(self, thread: str, *, actor=None, **opts) -> dict:
        """opts: older_than_ms, keep_last, keep_clean_only, dry_run."""
        return await self.request("POST", self._t(thread, "prune"), {**opts, "actor": actor or self.actor})

    async def threads(self, **query) -> dict:
        return await self.request("GET", "/v1/threads", query=query)

    # Erasure, pins, retention.
    async def erase(self, thread: str, *, reason: str, ids: list | None = None, all: bool = False, actor=None) -> dict:
        """Erases records of a thread (ids, or all but its erasure records): the bytes leave the disk, an audit record stays."""
        req = {"reason": reason, "actor": actor or self.actor}
        if ids is not None:
            req["ids"] = ids
        if all:
            req["all"] = True
        return await self.request("POST", self._t(thread, "erase"), req)

    async def pin(self, thread: str, id: str, *, reason: str = "", actor=None) -> dict:
        return await self.request("POST", self._t(thread, "pins"), {"id": id, "reason": reason, "actor": actor or self.actor})

    async def retention(self) -> list:
        return (await self.request("GET", "/v1/retention"))["policies"]

    async def set_retention(self, *, keep_last: int, thread=None, all=False, max_age_ms=0, actor=None) -> dict:
        return await self.request("PUT", "/v1/retention", {"thread": thread or "", "all": all, "keep_last": keep_last, "max_age_ms": max_age_ms, "actor": actor or self.actor})

    async def clear_retention(self, *, thread=None, all=False, actor=None) -> dict:
        return await self.request("DELETE", "/v1/retention", {"thread": thread or "", "all": all, "actor": actor or self.actor})

    async def health(self) -> dict:
        return await self.request("GET", "/healthz")

    async def close(self) -> None:
        """Flushes what is queued and closes the connections."""
        try:
            await self.flush()
        finally:
            await self._http.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


def _settle(fut, result=None, exc=None) -> None:
    if fut.done():  # its caller was cancelled meanwhile
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


async def connect(url: str | None = None, *, token: str | None = None, actor: str | None = None, home: str | None = None,
                  spl_binary: str | None = None, max_in_flight: int = 64, coalesce: bool = True) -> Client:
    """A client of spl serve: url, else $SPL_URL, else the local spl of the
    data directory (started through the spl binary when none answers). The
    token (else $SPL_TOKEN with a URL, else the local server's own) is sent
    as ``Authorization: Bearer …``; the actor (else $SPL_ACTOR) is the
    actor of what the client writes."""
    actor = actor or os.environ.get("SPL_ACTOR") or None
    url = url or os.environ.get("SPL_URL")
    if url:
        token = token or os.environ.get("SPL_TOKEN") or None
    else:
        url = await local_url(home, spl_binary)
        # The local server's own credentials, which its user may read:
        # $SPL_TOKEN is another server's (it goes with $SPL_URL).
        token = token or local_token(home)
    c = Client(url, token, actor, max_in_flight, coalesce)
    try:
        await c.health()
    except SplError as e:
        if e.status != 503:
            raise
    return c
