"""Errors of the HTTP API as types: one class per answer class."""

from __future__ import annotations


class SplError(Exception):
    """Any error answer of spl serve: status, message, and for a 400 the
    field and rule; ``code`` is the answer's machine-readable code when it
    has one (the run cases: run_cancelled, run_finished, effect_mismatch,
    run_not_waiting)."""

    def __init__(self, status: int, message: str, field: str | None = None, rule: str | None = None,
                 clock: int | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.rule = status, message, field, rule
        # For a conditional append refused (409 on expected_clock): the
        # clock the thread is at.
        self.clock = clock
        self.code = code


class InvalidError(SplError):
    """400 (and 413): invalid input, nothing was written; field and rule say what."""


class UnauthorizedError(SplError):
    """401: no or a wrong token."""


class ForbiddenError(SplError):
    """403: the token may not do this."""


class NotFoundError(SplError):
    """404: nothing found."""


class ConflictError(SplError):
    """409: an append conflict after every retry, or a session refusal."""


class UnavailableError(SplError):
    """503: storage unavailable; an append answered 503 may or may not have landed."""


class DiskFullError(SplError):
    """507 disk_full: the server's disk is full; nothing was written. Free space there and write again."""


class RunCancelledError(ConflictError):
    """409 run_cancelled: someone cancelled the run (spl run cancel, POST
    /v1/runs/{run}/cancel). The runner stops and may finish the run with
    state "cancelled". ``reason`` and ``actor`` say why and who;
    ``request`` is the cancel request's record id and ``clock`` its clock."""

    def __init__(self, status: int, message: str, *, reason: str | None = None, actor: str | None = None,
                 request: str | None = None, clock: int | None = None, field: str | None = None,
                 rule: str | None = None):
        super().__init__(status, message, field, rule, clock, "run_cancelled")
        self.reason, self.actor, self.request = reason, actor, request


class RunFinishedError(ConflictError):
    """409 run_finished: the run has its run_terminal checkpoint (or this
    Run object was finished or closed): nothing more is written to it."""

    def __init__(self, status: int, message: str, field: str | None = None, rule: str | None = None,
                 clock: int | None = None):
        super().__init__(status, message, field, rule, clock, "run_finished")


class EffectMismatchError(ConflictError):
    """409 effect_mismatch: a result is recorded for the call id with
    another input hash (the determinism check). ``recorded`` and ``got``
    are the input hashes ("blake3:…"), ``recorded_tool`` the tool of the
    recorded result; ``run_id``, ``call_id`` and ``tool`` name the call
    when Run.effect raised it. Run.effect(..., rerun=True) runs it again."""

    def __init__(self, status: int, message: str, *, recorded: str | None = None, got: str | None = None,
                 recorded_tool: str | None = None, field: str | None = None, rule: str | None = None):
        super().__init__(status, message, field, rule, None, "effect_mismatch")
        self.recorded, self.got, self.recorded_tool = recorded, got, recorded_tool
        self.run_id: str | None = None
        self.call_id: str | None = None
        self.tool: str | None = None


class RunNotWaitingError(ConflictError):
    """409 run_not_waiting: a signal (Client.signal_run) to a run that is
    not waiting for it: one running, one waiting for another signal, or a
    second signal for one wait (the first was taken). The message says
    what the run is and waits for. A finished or cancelled run is a
    RunFinishedError instead."""

    def __init__(self, status: int, message: str, field: str | None = None, rule: str | None = None,
                 clock: int | None = None):
        super().__init__(status, message, field, rule, clock, "run_not_waiting")


_BY_STATUS = {400: InvalidError, 413: InvalidError, 401: UnauthorizedError, 403: ForbiddenError,
              404: NotFoundError, 409: ConflictError, 503: UnavailableError, 507: DiskFullError}


def error_of(status: int, body) -> SplError:
    """The typed error of an error answer: by status, and for a 409 by its code."""
    body = body if isinstance(body, dict) else {}
    message = body.get("error") or f"HTTP {status}"
    field, rule, code = body.get("field"), body.get("rule"), body.get("code")
    if status == 409 and code == "run_cancelled":
        c = body.get("cancel") if isinstance(body.get("cancel"), dict) else {}
        return RunCancelledError(status, message, reason=c.get("reason"), actor=c.get("actor"), request=c.get("request"),
                                 clock=c.get("clock"), field=field, rule=rule)
    if status == 409 and code == "run_finished":
        return RunFinishedError(status, message, field, rule, body.get("clock"))
    if status == 409 and code == "effect_mismatch":
        return EffectMismatchError(status, message, recorded=body.get("recorded"), got=body.get("got"),
                                   recorded_tool=body.get("recorded_tool"), field=field, rule=rule)
    if status == 409 and code == "run_not_waiting":
        return RunNotWaitingError(status, message, field, rule, body.get("clock"))
    cls = _BY_STATUS.get(status, SplError)
    return cls(status, message, field, rule, body.get("clock"), code)


class UnlandedError(Exception):
    """Checkpoints of a run that did not land: raised by Run.flush, finish
    and close. ``failures`` lists each write-behind checkpoint that failed,
    as (phase, error) in call order; ``pending`` counts those still queued
    when the flush timeout ran out (0 when it did not). From Run.finish
    after the run_terminal checkpoint landed, ``report`` is its
    FinishReport (the run is finished all the same); else None."""

    def __init__(self, run_id: str, failures: list, pending: int = 0, timeout: float | None = None):
        self.run_id, self.failures, self.pending, self.timeout = run_id, list(failures), pending, timeout
        self.report = None
        parts = []
        if pending:
            parts.append(f"{pending} checkpoints still queued after {timeout:g}s")
        if failures:
            listed = "; ".join(f"{phase}: {err}" for phase, err in failures[:10])
            more = f"; and {len(failures) - 10} more" if len(failures) > 10 else ""
            parts.append(f"{len(failures)} checkpoints did not land ({listed}{more})")
        super().__init__(f"spl: run {run_id!r}: " + ", ".join(parts or ["checkpoints did not land"]))


class StillWaitingError(Exception):
    """Raised by Run.await_signal when the signal did not come within its
    timeout: the run is recorded as waiting for signal ``name`` (its
    status is waiting), nothing is wrong, and this process may end. Once
    someone sends the signal (Client.signal_run, spl run signal), a resume
    of the run finds it (Run.signal) and await_signal returns it at once.
    Not an answer of the server: not an SplError."""

    def __init__(self, run_id: str, name: str, timeout: float):
        self.run_id, self.name, self.timeout = run_id, name, timeout
        waited = f"it did not come within {timeout:g}s" if timeout > 0 else "it has not come"
        super().__init__(f"spl: run {run_id!r} is waiting for signal {name!r} ({waited}): the run stays waiting and "
                         f"this process may end; a resume after the signal continues it")
