"""Errors of the HTTP API as types: one class per answer class."""

from __future__ import annotations


class SplError(Exception):
    """Any error answer of spl serve: status, message, and for a 400 the field and rule."""

    def __init__(self, status: int, message: str, field: str | None = None, rule: str | None = None,
                 clock: int | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.rule = status, message, field, rule
        # For a conditional append refused (409 on expected_clock): the
        # clock the thread is at.
        self.clock = clock


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


_BY_STATUS = {400: InvalidError, 413: InvalidError, 401: UnauthorizedError, 403: ForbiddenError,
              404: NotFoundError, 409: ConflictError, 503: UnavailableError}


def error_of(status: int, body) -> SplError:
    body = body if isinstance(body, dict) else {}
    cls = _BY_STATUS.get(status, SplError)
    return cls(status, body.get("error") or f"HTTP {status}", body.get("field"), body.get("rule"), body.get("clock"))
