// Errors of the HTTP API as types: one class per answer class, each
// carrying the status and, for a 400, the field and rule at fault.

/** SplError is any error answer of spl serve. */
export class SplError extends Error {
  readonly status: number;
  readonly field?: string;
  readonly rule?: string;
  /** For a conditional append refused (409 on expected_clock): the clock the thread is at. */
  readonly clock?: number;
  constructor(status: number, message: string, field?: string, rule?: string, clock?: number) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.field = field;
    this.rule = rule;
    this.clock = clock;
  }
}
/** 400 (and 413): invalid input, nothing was written; field and rule say what. */
export class InvalidError extends SplError {}
/** 401: no or a wrong token. */
export class UnauthorizedError extends SplError {}
/** 403: the token may not do this (a read token writing). */
export class ForbiddenError extends SplError {}
/** 404: nothing found. */
export class NotFoundError extends SplError {}
/** 409: an append conflict after every retry, or a session refusal. */
export class ConflictError extends SplError {}
/** 503: storage unavailable; an append answered 503 may or may not have landed. */
export class UnavailableError extends SplError {}

/** errorOf maps an error answer to its class. */
export function errorOf(status: number, body: { error?: string; field?: string; rule?: string; clock?: number } | undefined): SplError {
  const msg = body?.error ?? `HTTP ${status}`;
  const args = [status, msg, body?.field, body?.rule, body?.clock] as const;
  switch (status) {
    case 400: case 413: return new InvalidError(...args);
    case 401: return new UnauthorizedError(...args);
    case 403: return new ForbiddenError(...args);
    case 404: return new NotFoundError(...args);
    case 409: return new ConflictError(...args);
    case 503: return new UnavailableError(...args);
  }
  return new SplError(...args);
}
