"""Durable agent runs over spl serve's HTTP API (/v1/runs/{run}/…), with
the promises of the Go SDK's Run (sdk/run.go, sdk/run_write.go)::

    async with client.run("r1", thread="T") as run:
        if run.status == "terminal":
            return run.terminal_result        # finished: run nothing
        await run.checkpoint("step_started", snapshot)        # write-behind
        await run.checkpoint("post_llm", snapshot)            # durable
        res = await run.effect("call-0", "append_line", {"n": 0}, tool)
        await run.finish({"final_text": "done"})

A run that needs a person waits for a named signal, across processes::

        try:
            sig = await run.await_signal("approval", {"question": "ship it?"})
        except spl.StillWaitingError:
            return                 # recorded as waiting: the process may end
        approved = sig.data        # what client.signal_run(..., data=…) sent

A checkpoint returns at once, queued; one background task per run sends
the queue in call order, in batches (POST /v1/runs/{run}/checkpoints),
and drops the runtime snapshots (phases step_started and post_llm) that a
newer queued snapshot supersedes (coalesced: a resume reads the newest).
post_llm, and any checkpoint given durable=True, returns only once stored,
after everything queued before it, and is never dropped. A checkpoint
that fails to land is reported by the next flush(), finish() or close().

The rules (phase names, payload shapes, who may write what, when a run is
finished or cancelled) are the server's: this module sends and maps the
server's answers to typed errors; it checks nothing of its own but the
state of this Run object (finished, closed, refused)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote

from ._errors import (EffectMismatchError, InvalidError, RunCancelledError, RunFinishedError, SplError,
                      StillWaitingError, UnavailableError, UnlandedError)

# Phases whose checkpoints are runtime snapshots (kind agent.run.snapshot):
# the ones a newer queued snapshot supersedes.
SNAPSHOT_PHASES = frozenset({"step_started", "post_llm"})

# Bounds of one checkpoints request: the server takes 1 to 256 checkpoints
# and 2 MiB of body; a batch is cut at half that much checkpoint JSON. A
# checkpoint larger than that goes alone.
_MAX_BATCH = 256
_MAX_BATCH_BYTES = 1 << 20

# Every run route is safe to retry (a 503, or a connection that failed
# before an answer came): this many attempts, backing off from 50 ms.
_ATTEMPTS = 5
_BACKOFF = 0.05

# A 400 about one checkpoint of a batch names it: checkpoints[i]….
_CHECKPOINT_FIELD = re.compile(r"^checkpoints\[(\d+)\]")

_RETRYABLE = (UnavailableError, OSError, asyncio.IncompleteReadError)

# The phase of a checkpoint that records that the run waits for a signal
# (its payload's "signal" names it), and how often Run.await_signal asks
# whether the signal came.
PHASE_AWAITING_SIGNAL = "awaiting_signal"
_SIGNAL_POLL = 1.0


# One encoder for every call: json.dumps with arguments other than the
# defaults makes a new one each time (0.7 µs of a checkpoint's 3.4 µs).
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _dumps(v: Any) -> bytes:
    return _encode(v).encode()


@dataclass(frozen=True)
class RunCheckpoint:
    """A stored phase checkpoint of a run, as POST /v1/runs/{run}/open
    answers it: phase, kind (agent.run.checkpoint, or agent.run.snapshot
    for a runtime snapshot), record id and clock, time (RFC 3339) and
    payload (a dict; None when the answer holds none)."""

    phase: str
    kind: str | None
    id: str | None
    clock: int | None
    time: str | None
    payload: dict | None

    @classmethod
    def of(cls, j: Any) -> RunCheckpoint | None:
        """The checkpoint of an answer's JSON object; None for null."""
        if not isinstance(j, dict):
            return None
        return cls(j.get("phase"), j.get("kind"), j.get("id"), j.get("clock"), j.get("time"), j.get("payload"))


@dataclass(frozen=True)
class RunSignal:
    """A signal sent to a run (Client.signal_run, spl run signal), as
    POST /v1/runs/{run}/open answers it: its name, the sender's data (any
    JSON value; None for none), who sent it (actor), and the
    agent.run.signal record's id (request) and clock."""

    name: str
    data: Any
    actor: str | None
    request: str | None
    clock: int | None

    @classmethod
    def of(cls, j: Any) -> RunSignal | None:
        """The signal of an answer's JSON object; None for null."""
        if not isinstance(j, dict) or not isinstance(j.get("name"), str):
            return None
        return cls(j["name"], j.get("data"), j.get("actor"), j.get("request"), j.get("clock"))


@dataclass(frozen=True)
class RecordedEffect:
    """A tool result recorded for a call id: its tool, input hash and
    clock (the newest per call id). input_hash is None for one this Run
    recorded (the server computes hashes; its answer does not repeat it)."""

    call_id: str
    tool: str | None
    input_hash: str | None
    clock: int | None


@dataclass(frozen=True)
class EffectResult:
    """What Run.effect returns: the output as recorded (the thread's
    redaction applied), whether it was replayed from a record (the tool's
    fn did not run, or ran but another writer recorded first), and the
    effect record's id and clock."""

    output: Any
    replayed: bool
    id: str | None
    clock: int | None


@dataclass(frozen=True)
class RunStats:
    """What a Run wrote so far: records landed (checkpoints, effects, the
    terminal one), runtime snapshots coalesced away, effects run and
    recorded by this Run, effects replayed from their records, and
    checkpoints queued and not yet settled."""

    written: int
    coalesced: int
    ran: int
    replayed: int
    pending: int


@dataclass(frozen=True)
class FinishReport:
    """What Run.finish wrote: the run_terminal checkpoint's id and clock,
    the run's status after it (terminal, failed or cancelled), and the
    run's stats."""

    id: str | None
    clock: int | None
    status: str | None
    stats: RunStats


class _Item:
    """A write in the run's queue: a checkpoint, or an effect's result
    (route "effects", sent with the checkpoints queued before it): its
    JSON, and for a durable one the future its caller waits on."""

    __slots__ = ("seq", "phase", "text", "future", "settled", "route")

    def __init__(self, phase: str, text: bytes, future: asyncio.Future | None, route: str = "checkpoints"):
        self.seq, self.phase, self.text, self.future, self.settled, self.route = 0, phase, text, future, False, route


def _again(e: SplError) -> SplError:
    """A fresh copy of a refusal this Run keeps raising (one exception
    object raised again and again would pile up tracebacks)."""
    if isinstance(e, RunCancelledError):
        return RunCancelledError(e.status, e.message, reason=e.reason, actor=e.actor, request=e.request, clock=e.clock,
                                 field=e.field, rule=e.rule)
    if isinstance(e, RunFinishedError):
        return RunFinishedError(e.status, e.message, e.field, e.rule, e.clock)
    return e


class Run:
    """An open run of run_id on thread: its checkpoints (checkpoint,
    write-behind), its tool effects (effect, durable) and its end
    (finish). Made by Client.run (``async with``) or Client.open_run.

    What opening it found: ``status`` (running, waiting, terminal, failed
    or cancelled), ``waiting_for`` (status waiting: the signal the run
    waits for; else None), ``signal`` (the signal the newest checkpoint
    waited for, come since: a RunSignal to continue with, which
    await_signal returns; else None), ``signals`` (every signal sent to
    the run, in clock order: a list of RunSignal), ``resumed`` (the run had checkpoints), ``latest`` and
    ``snapshot`` (the newest checkpoint and the newest runtime snapshot,
    RunCheckpoint or None), ``terminal_result`` (the stored result of a
    finished run: return it, run nothing), ``pending_llm_response`` (the
    snapshot's: run its tool calls, skip the LLM call), ``effects_recorded``
    (how many call ids have a recorded result) and ``cancel`` (the cancel
    request, a RunCancelledError, or None).

    A Run belongs to one event loop; one run id must be written by one Run
    at a time. Leave it through finish(), or close() (``async with`` does),
    which waits at most flush_timeout for the queued checkpoints."""

    def __init__(self, client, run_id: str, thread: str, actor: str | None, flush_timeout: float, opened: Any):
        self._client = client
        self.run_id, self.thread, self.actor = run_id, thread, actor
        self.flush_timeout = flush_timeout
        self._path = f"/v1/runs/{quote(run_id, safe='')}/"
        o = opened if isinstance(opened, dict) else {}
        self.status: str = o.get("status") or "running"
        self.resumed: bool = bool(o.get("resumed"))
        self.latest: RunCheckpoint | None = RunCheckpoint.of(o.get("latest"))
        self.snapshot: RunCheckpoint | None = RunCheckpoint.of(o.get("snapshot"))
        self.terminal_result: Any = o.get("terminal_result")
        self.pending_llm_response: dict | None = o.get("pending_llm_response")
        self._effects: dict[str, RecordedEffect] = {}
        for e in o.get("effects") or []:
            if isinstance(e, dict) and isinstance(e.get("call_id"), str):
                self._effects[e["call_id"]] = RecordedEffect(e["call_id"], e.get("tool"), e.get("input_hash"), e.get("clock"))
        self.waiting_for: str | None = o.get("waiting_for") or None
        self.signal: RunSignal | None = RunSignal.of(o.get("signal"))
        self.signals: list[RunSignal] = [g for g in map(RunSignal.of, o.get("signals") or []) if g is not None]
        self.cancel: RunCancelledError | None = self._cancel_of(o.get("cancel"))
        # The wait this Run is in, when it is: (signal, clock of its
        # awaiting_signal checkpoint, how many checkpoints this Run had
        # queued then); a checkpoint queued since ends it.
        self._wait: tuple[str, int, int] | None = None
        if self.status == "waiting" and self.waiting_for and self.latest is not None:
            self._wait = (self.waiting_for, self.latest.clock or 0, 0)
        # What refuses the next checkpoint and effect at once: the server's
        # run_cancelled or run_finished, once seen.
        self._refused: SplError | None = self.cancel
        # Nothing more is written to a run that has its run_terminal
        # checkpoint, nor through a Run finished or closed.
        self._closed = self.status in ("terminal", "failed") or (self.latest is not None and self.latest.phase == "run_terminal")

        self._queue: list[_Item] = []
        self._enqueued = 0  # writes queued so far (their seq)
        self._checkpoints_queued = 0  # of them, checkpoints
        self._settled = 0  # every checkpoint up to this seq landed, failed or was coalesced
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._failures: list[tuple[str, BaseException]] = []
        self._written = self._coalesced = self._ran = self._replayed = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._writer: asyncio.Task | None = None
        self._inflight: list[_Item] = []  # the take being written

    # What opening found.
    @property
    def effects_recorded(self) -> int:
        """How many call ids have a recorded result (at open, and recorded by this Run since)."""
        return len(self._effects)

    @property
    def recorded_effects(self) -> dict[str, RecordedEffect]:
        """The recorded results by call id (a copy)."""
        return dict(self._effects)

    @property
    def stats(self) -> RunStats:
        """What the run wrote so far."""
        return RunStats(self._written, self._coalesced, self._ran, self._replayed, self._enqueued - self._settled)

    # Checkpoints.
    async def checkpoint(self, phase: str, payload: dict | None = None, *, durable: bool | None = None) -> None:
        """Queues a phase checkpoint and returns at once (write-behind):
        the run's writer sends it in the background, in call order.
        payload (a dict, JSON-serialisable; None is {}) is encoded at the
        call: changing it afterwards changes nothing stored.

        durable (default: True for post_llm, the snapshot of an LLM answer
        paid for; False for every other phase) makes the call return only
        once the checkpoint is stored, after everything queued before it,
        raising its own error; durable=False makes post_llm write-behind.
        A durable checkpoint is never coalesced away.

        Raises RunCancelledError once the run is seen cancelled,
        RunFinishedError once it is finished (or this Run closed), and the
        server's error (InvalidError naming checkpoints[i].phase or
        .payload…) for a durable one; a write-behind one's error comes
        from the next flush(), finish() or close()."""
        if durable is None:
            durable = phase == "post_llm"
        if durable:
            await self._durable(self._enqueue_durable(phase, payload))
            return
        self._check_writable()
        self._enqueue(_Item(phase, self._checkpoint_text(phase, payload), None))

    def _checkpoint_text(self, phase: str, payload: dict | None) -> bytes:
        return _dumps({"phase": phase, "payload": {} if payload is None else payload,
                       "timestamp_ms": time.time_ns() // 1_000_000})

    def _enqueue_durable(self, phase: str, payload: dict | None) -> _Item:
        """Queues a durable checkpoint (see _durable)."""
        self._check_writable()
        it = _Item(phase, self._checkpoint_text(phase, payload), asyncio.get_running_loop().create_future())
        # Retrieved here, so that a caller who stopped waiting (cancelled)
        # leaves no "exception never retrieved" behind.
        it.future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._enqueue(it)
        return it

    async def _durable(self, it: _Item) -> Any:
        """Waits until a durable checkpoint queued is stored, after
        everything queued before it: its receipt ({id, clock}), or its
        error."""
        # Shielded: a caller cancelled while waiting does not unqueue it (it
        # is in doubt, as in Go); the writer still writes it.
        return await asyncio.shield(it.future)

    async def flush(self) -> None:
        """Waits until every checkpoint queued so far has landed, failed or
        been coalesced, at most flush_timeout seconds, and raises the
        write-behind checkpoints that failed since the last report: an
        UnlandedError listing them (with ``pending`` those still queued
        at the timeout), or a RunCancelledError when every failure was the
        run's cancellation."""
        target = self._enqueued
        try:
            async with asyncio.timeout(self.flush_timeout):
                await self._wait_settled(target)
        except TimeoutError:
            raise self._unlanded(self._take_failures(), target - self._settled) from None
        failures = self._take_failures()
        if failures:
            raise self._unlanded(failures, 0)

    # Signals.
    async def await_signal(self, name: str, payload: dict | None = None, *, timeout: float = 0.0) -> RunSignal:
        """Makes the run wait for signal name (a person's approval, hours or
        days away), as the Go SDK's Run.AwaitSignal. A name is one wait of
        the run (to wait twice, use two names): when opening found a
        signal of that name sent (``signal``, else the first of
        ``signals``; the run may have resumed from a checkpoint written
        after the wait), returns it at once and writes nothing. Otherwise
        records a durable checkpoint of phase
        awaiting_signal, payload's fields (a dict; None is {}) and
        "signal": name, after everything queued before it (the run is
        then waiting: someone sends the signal with Client.signal_run or
        spl run signal), unless the run already waits for name (opened
        waiting for it, and nothing checkpointed through this Run since).
        Then asks about once a second (POST /v1/runs/{run}/open) whether
        the signal came, and returns it (a RunSignal: name, data, actor,
        request, clock) when it does.

        timeout: how long to wait for it, in seconds (0: not at all; it
        is asked for once). Then raises StillWaitingError: the run stays
        waiting, the process may end, and a resume after the signal
        continues with it (await_signal returns it at once).

        Raises RunCancelledError when the run is cancelled (at the open,
        or while waiting), RunFinishedError when it is finished (or this
        Run closed), and the server's error for the checkpoint
        (InvalidError naming checkpoints[0].payload.signal for a name
        that is not a signal's: 1 to 64 of a-z 0-9 _ . -, from a letter)."""
        if self.signal is not None and self.signal.name == name:
            return self.signal
        answered = self._named(self.signals, name)
        if answered is not None:
            return answered
        self._check_writable()
        w = self._wait
        if w is not None and w[0] == name and w[2] == self._checkpoints_queued:
            # Waiting for it since checkpoint w: the open's newest, or one
            # this Run recorded.
            since = w[1]
        else:
            # The wait recorded. Also when the run was opened waiting for it
            # but this Run checkpointed since: a checkpoint written after an
            # awaiting_signal one ends its wait (a run waits by its newest).
            it = self._enqueue_durable(PHASE_AWAITING_SIGNAL, {**(payload or {}), "signal": name})
            receipt = await self._durable(it)
            since = (receipt.get("clock") or 0) if isinstance(receipt, dict) else 0
            self._wait = (name, since, self._checkpoints_queued)
            self.status, self.waiting_for, self.signal = "waiting", name, None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            o = await self._post("open", _dumps({"thread": self.thread}))
            signals = [g for g in map(RunSignal.of, o.get("signals") or []) if g is not None]
            sig = RunSignal.of(o.get("signal"))
            if sig is None or sig.name != name or (sig.clock or 0) <= since:
                sig = self._named(signals, name)
            if sig is not None:
                self.status, self.waiting_for, self.signal, self._wait = o.get("status") or "running", None, sig, None
                self.signals = signals or [sig]
                return sig
            cancel = self._cancel_of(o.get("cancel"))
            if cancel is not None:
                self.cancel = self._refused = cancel
                self.status, self.waiting_for = o.get("status") or "cancelled", None
                raise _again(cancel)
            if o.get("status") in ("terminal", "failed"):
                self.status, self.waiting_for = o["status"], None
                self._refused = RunFinishedError(409, f"spl: run {self.run_id!r} on thread {self.thread!r} was finished "
                                                      f"({o['status']}) while waiting for signal {name!r}")
                raise _again(self._refused)
            left = deadline - loop.time()
            if left <= 0:
                raise StillWaitingError(self.run_id, name, timeout)
            await asyncio.sleep(min(_SIGNAL_POLL, left))

    @staticmethod
    def _named(signals: list[RunSignal], name: str) -> RunSignal | None:
        """The first signal of name; None when none."""
        return next((g for g in signals if g.name == name), None)

    def _cancel_of(self, c: Any) -> RunCancelledError | None:
        """The cancel request of an answer's "cancel" object; None for null."""
        if not isinstance(c, dict):
            return None
        return RunCancelledError(409, f"run {self.run_id!r} cancelled by {c.get('actor')}: {c.get('reason')}",
                                 reason=c.get("reason"), actor=c.get("actor"), request=c.get("request"),
                                 clock=c.get("clock"))

    # Effects.
    async def effect(self, call_id: str, tool: str, args: Any, fn: Callable[[], Any], *, rerun: bool = False) -> EffectResult:
        """Runs tool call call_id once: when a result is recorded for it
        with the same input (the server's hash of tool and args), returns
        that result, replayed, and fn does not run; else calls fn (sync,
        or async: awaited), records its result (JSON-serialisable) durably
        and returns the output as stored. Lands after every checkpoint
        queued before it, in the same request.

        args is sent as JSON in its own key order (the server hashes its
        compact text, as Go's InputHash of a json.RawMessage). An error
        from fn is raised and records nothing: the call runs again on the
        next attempt (at least once for the tool, exactly once for the
        recorded result: a tool with side effects must be idempotent by
        call id). A result recorded with other input is an
        EffectMismatchError naming both hashes, unless rerun=True, which
        runs fn again and records its result. A cancelled run raises
        RunCancelledError: before fn runs when this Run has seen the
        cancel (an answer of the server since it was opened), else when
        the result is sent, which the server then refuses with the
        checkpoints queued before it, as the Go and TypeScript SDKs do."""
        self._check_writable()
        base: dict[str, Any] = {"thread": self.thread}
        if self.actor:
            base["actor"] = self.actor
        base.update(call_id=call_id, tool=tool, args=args)
        if rerun:
            base["rerun"] = True
        if call_id in self._effects:
            j = await self._effect_post(base, call_id, tool)
            if j.get("status") == "replayed":
                self._replayed += 1
                return EffectResult(j.get("output"), True, j.get("id"), j.get("clock"))
            # absent: a rerun of a mismatched result, or none recorded after all.
        out = fn()
        if inspect.isawaitable(out):
            out = await out
        self._check_writable()
        it = _Item(f"effect {call_id}", _dumps({**base, "output": out}), asyncio.get_running_loop().create_future(), "effects")
        it.future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._enqueue(it)
        try:
            j = await self._durable(it)
        except EffectMismatchError as e:
            e.run_id, e.call_id, e.tool = self.run_id, call_id, tool
            raise
        status = j.get("status")
        if status == "recorded":
            self._ran += 1
            self._written += 1
            self._effects[call_id] = RecordedEffect(call_id, tool, None, j.get("clock"))
            return EffectResult(j.get("output"), False, j.get("id"), j.get("clock"))
        if status == "replayed":  # another writer recorded first: its result holds
            self._replayed += 1
            self._effects.setdefault(call_id, RecordedEffect(call_id, tool, None, j.get("clock")))
            return EffectResult(j.get("output"), True, j.get("id"), j.get("clock"))
        raise SplError(500, f"spl: run {self.run_id!r}: effect {call_id!r}: the server answered status {status!r} to a result sent")

    async def _effect_post(self, body: dict, call_id: str, tool: str) -> dict:
        try:
            return await self._post("effects", _dumps(body))
        except EffectMismatchError as e:
            e.run_id, e.call_id, e.tool = self.run_id, call_id, tool
            raise
        except (RunCancelledError, RunFinishedError) as e:
            self._refused = e
            raise

    # The end.
    async def finish(self, result: Any = None, *, state: str = "completed", payload: dict | None = None) -> FinishReport:
        """Writes the run_terminal checkpoint durably (state "completed",
        "failed", "error" or "cancelled"; result: what a resume of the
        finished run returns; payload: more fields such as final_text,
        requested_model) after every checkpoint queued before it, which it
        waits for at most flush_timeout (else UnlandedError with
        ``pending``, and nothing finished: call it again). Then the Run
        takes no more writes. A cancelled run may be finished with state
        "cancelled"; a finished one is RunFinishedError. A run finished
        "completed" without a result shows as failed (the server's rule:
        a terminal run has a terminal_result to return).

        Write-behind checkpoints that failed are raised after the terminal
        checkpoint landed, as an UnlandedError whose ``report`` is the
        FinishReport (the run is finished all the same); with state
        "cancelled", those refused because the run was cancelled are not."""
        if self._closed:
            raise self._finished_error()
        target = self._enqueued
        try:
            async with asyncio.timeout(self.flush_timeout):
                await self._wait_settled(target)
        except TimeoutError:
            raise UnlandedError(self.run_id, list(self._failures), target - self._settled, self.flush_timeout) from None
        body: dict[str, Any] = {"thread": self.thread}
        if self.actor:
            body["actor"] = self.actor
        body["state"] = state
        if result is not None:
            body["result"] = result
        if payload is not None:
            body["payload"] = payload
        body["replayed_effect_count"] = self._replayed
        try:
            j = await self._post("finish", _dumps(body))
        except RunFinishedError as e:
            # Sent again after a lost answer: the first one may be what
            # finished the run. Its terminal checkpoint says.
            if not getattr(e, "retried", False):
                raise
            j = await self._terminal_after_retry(e)
        self._closed = True
        self._written += 1
        self.status = j.get("status") or self.status
        await self._shutdown()
        failures = self._take_failures()
        if state == "cancelled":
            failures = [(p, e) for p, e in failures if not isinstance(e, RunCancelledError)]
        report = FinishReport(j.get("id"), j.get("clock"), j.get("status"), self.stats)
        if failures:
            err = UnlandedError(self.run_id, failures)
            err.report = report
            raise err
        return report

    async def _terminal_after_retry(self, e: RunFinishedError) -> dict:
        o = await self._post("open", _dumps({"thread": self.thread}))
        latest = RunCheckpoint.of(o.get("latest") if isinstance(o, dict) else None)
        if latest is None or latest.phase != "run_terminal":
            raise e
        return {"id": latest.id, "clock": latest.clock, "status": o.get("status")}

    async def close(self) -> None:
        """Stops the run without finishing it: takes no more writes, waits
        at most flush_timeout for the queued checkpoints, and raises those
        that did not land (as flush does). The run resumes from what
        landed. Closing again does nothing."""
        self._closed = True
        pending = await self._shutdown()
        failures = self._take_failures()
        if pending or failures:
            raise self._unlanded(failures, pending)

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, et, e, tb) -> bool:
        try:
            await self.close()
        except Exception as ce:
            if e is None:
                raise
            # The body's error goes on; what closing found rides with it.
            e.add_note(f"spl: closing run {self.run_id!r}: {ce}")
        return False

    # The writer.
    def _check_writable(self) -> None:
        if self._closed:
            raise self._finished_error()
        if self._refused is not None:
            raise _again(self._refused)

    def _finished_error(self) -> RunFinishedError:
        if self.status in ("terminal", "failed") or (self.latest is not None and self.latest.phase == "run_terminal"):
            return RunFinishedError(409, f"spl: run {self.run_id!r} on thread {self.thread!r} is finished ({self.status})")
        return RunFinishedError(409, f"spl: run {self.run_id!r}: this Run is closed")

    def _enqueue(self, it: _Item) -> None:
        if it.route == "checkpoints":
            self._checkpoints_queued += 1
        self._enqueued += 1
        it.seq = self._enqueued
        self._queue.append(it)
        self._wake.set()
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        """The run's writer: takes what is queued, drops the snapshots a
        newer queued one supersedes, sends the rest in batches, one take
        at a time, until the run is closed and its queue drained."""
        while True:
            while not self._queue:
                if self._stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
            items, self._queue = self._queue, []
            self._inflight = items
            try:
                await self._take(items)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # not an answer of the server: still each caller's
                for it in items:
                    self._settle(it, exc=e)
            finally:
                self._inflight = []
                self._settled = max(self._settled, items[-1].seq)
                self._progress()

    async def _take(self, items: list[_Item]) -> None:
        last = max((i for i, it in enumerate(items) if it.phase in SNAPSHOT_PHASES), default=-1)
        kept = []
        for i, it in enumerate(items):
            if it.phase in SNAPSHOT_PHASES and i != last and it.future is None:
                it.settled = True
                self._coalesced += 1
                continue
            kept.append(it)
        i = 0
        while i < len(kept):
            if kept[i].route != "checkpoints":
                await self._send_effect([], kept[i])
                i += 1
                continue
            batch: list[_Item] = []
            size = 0
            while i < len(kept) and kept[i].route == "checkpoints" and len(batch) < _MAX_BATCH and (not batch or size + len(kept[i].text) + 1 <= _MAX_BATCH_BYTES):
                batch.append(kept[i])
                size += len(kept[i].text) + 1
                i += 1
            nxt = kept[i] if i < len(kept) else None
            if nxt is not None and nxt.route == "effects" and size + len(nxt.text) <= _MAX_BATCH_BYTES:
                # A runner's step in one request: the checkpoints go with
                # the effect that follows them, and are stored before it.
                i += 1
                await self._send_effect(batch, nxt)
                continue
            await self._send(batch)

    async def _send_effect(self, batch: list[_Item], eff: _Item) -> None:
        """Sends an effect's result with the checkpoints queued before it
        (POST effects with checkpoints) and settles them all. A refusal
        that is not the run's (a checkpoint refused by name, the effect's
        input recorded otherwise) sends them apart, as without."""
        body = eff.text if not batch else b'{"checkpoints":[' + b",".join(it.text for it in batch) + b"]," + eff.text[1:]
        try:
            j = await self._post("effects", body)
        except SplError as e:
            if isinstance(e, (RunCancelledError, RunFinishedError)):
                self._refused = e
            elif batch and e.status < 500:
                await self._send(batch)
                await self._send_effect([], eff)
                return
            for it in batch:
                self._settle(it, exc=e)
            self._settle(eff, exc=e)
            return
        except Exception as e:
            for it in batch:
                self._settle(it, exc=e)
            self._settle(eff, exc=e)
            return
        receipts = j.get("checkpoints") if batch else []
        if not isinstance(receipts, list) or len(receipts) != len(batch):
            e = SplError(500, f"spl: run {self.run_id!r}: the server answered {len(receipts or [])} receipts for {len(batch)} checkpoints")
            for it in batch:
                self._settle(it, exc=e)
            self._settle(eff, exc=e)
            return
        for it, rc in zip(batch, receipts):
            self._settle(it, rc)
        self._settle(eff, j)

    async def _send(self, batch: list[_Item]) -> None:
        """Sends one batch of checkpoints and settles each of them. One
        that the server refuses by its index fails alone: the others go
        again without it."""
        head = {"thread": self.thread}
        if self.actor:
            head["actor"] = self.actor
        body = _dumps(head)[:-1] + b',"checkpoints":[' + b",".join(it.text for it in batch) + b"]}"
        try:
            j = await self._post("checkpoints", body)
        except InvalidError as e:
            m = _CHECKPOINT_FIELD.match(e.field or "")
            if m and len(batch) > 1 and int(m.group(1)) < len(batch):
                i = int(m.group(1))
                self._settle(batch[i], exc=e)
                await self._send(batch[:i] + batch[i + 1:])
                return
            if e.status == 413 and len(batch) > 1:
                half = len(batch) // 2
                await self._send(batch[:half])
                await self._send(batch[half:])
                return
            for it in batch:
                self._settle(it, exc=e)
            return
        except Exception as e:
            if isinstance(e, (RunCancelledError, RunFinishedError)):
                self._refused = e
            for it in batch:
                self._settle(it, exc=e)
            return
        receipts = j.get("receipts") if isinstance(j, dict) else None
        if not isinstance(receipts, list) or len(receipts) != len(batch):
            e = SplError(500, f"spl: run {self.run_id!r}: the server answered {len(receipts or [])} receipts for {len(batch)} checkpoints")
            for it in batch:
                self._settle(it, exc=e)
            return
        for it, rc in zip(batch, receipts):
            self._settle(it, rc)

    def _settle(self, it: _Item, receipt: Any = None, exc: BaseException | None = None, report: bool = True) -> None:
        if it.settled:
            return
        it.settled = True
        if exc is None and it.route == "checkpoints":
            self._written += 1
        elif it.future is None and report:
            # A durable checkpoint's caller gets its error itself.
            self._failures.append((it.phase, exc))
        if it.future is not None and not it.future.done():
            if exc is None:
                it.future.set_result(receipt)
            else:
                it.future.set_exception(exc)

    def _progress(self) -> None:
        keep = []
        for target, fut in self._waiters:
            if fut.done():
                continue
            if target <= self._settled:
                fut.set_result(None)
            else:
                keep.append((target, fut))
        self._waiters = keep

    async def _wait_settled(self, target: int) -> None:
        if self._settled >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        await fut

    async def _shutdown(self) -> int:
        """Stops the writer once it has drained the queue, waiting at most
        flush_timeout; returns how many checkpoints it gave up on then
        (in doubt: sent or not, they may yet land)."""
        self._stopping = True
        self._wake.set()
        w = self._writer
        if w is None or w.done():
            return 0
        done, _ = await asyncio.wait({w}, timeout=self.flush_timeout)
        if done:
            return 0
        left = [it for it in self._inflight + self._queue if not it.settled]
        w.cancel()
        await asyncio.wait({w})
        gone = RunFinishedError(409, f"spl: run {self.run_id!r}: closed after {self.flush_timeout:g}s before the checkpoint was stored (in doubt)")
        for it in left + self._queue:
            # Counted as pending, not as failures; a durable one's caller
            # gets the error.
            self._settle(it, exc=gone, report=False)
        self._queue = []
        self._settled = self._enqueued
        self._progress()
        return len(left)

    def _take_failures(self) -> list:
        f, self._failures = self._failures, []
        return f

    def _unlanded(self, failures: list, pending: int) -> Exception:
        if not pending and failures and all(isinstance(e, RunCancelledError) for _, e in failures):
            return _again(failures[0][1])
        return UnlandedError(self.run_id, failures, pending, self.flush_timeout)

    async def _post(self, route: str, body: bytes) -> dict:
        return await post_run(self._client, self._path + route, body)


async def post_run(client, path: str, body: bytes) -> dict:
    """POSTs to a route of a run, again on a 503 or a connection that
    failed (every run route is safe to retry), backing off. An SplError
    raised after a retry has ``retried`` set."""
    delay = _BACKOFF
    for attempt in range(_ATTEMPTS):
        try:
            j = await client._send("POST", path, body)
            return j if isinstance(j, dict) else {}
        except _RETRYABLE as e:
            if attempt == _ATTEMPTS - 1:
                if isinstance(e, SplError):
                    e.retried = attempt > 0
                raise
        except SplError as e:
            e.retried = attempt > 0
            raise
        await asyncio.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


class RunHandle:
    """What Client.run returns: awaited, the run's detail (GET
    /v1/runs/{run}, a dict, as before); entered (``async with``), the
    open Run, closed on the way out (see Run.close)."""

    def __init__(self, client, run_id: str, thread: str | None, actor: str | None, flush_timeout: float, outputs: bool):
        self._client, self._run_id, self._thread = client, run_id, thread
        self._actor, self._flush_timeout, self._outputs = actor, flush_timeout, outputs
        self._run: Run | None = None

    def __await__(self):
        return self._client.run_detail(self._run_id, thread=self._thread, outputs=self._outputs).__await__()

    async def __aenter__(self) -> Run:
        self._run = await self._client.open_run(self._run_id, thread=self._thread, actor=self._actor,
                                                flush_timeout=self._flush_timeout)
        return self._run

    async def __aexit__(self, et, e, tb) -> bool:
        return await self._run.__aexit__(et, e, tb)
