// Errors of the HTTP API as types: one class per answer class, each
// carrying the status and, for a 400, the field and rule at fault; a 409
// of a run (its "code") maps to a class of its own, a ConflictError still.
// StillWaitingError is no answer: a wait for a signal that ended first.
import type { FinishReport } from "./run.js";

/** SplError is any error answer of spl serve. */
export class SplError extends Error {
  readonly status: number;
  readonly field?: string;
  readonly rule?: string;
  /** For a conditional append refused (409 on expected_clock): the clock the thread is at. */
  readonly clock?: number;
  /** The answer's code, when it has one (run_cancelled, run_finished, effect_mismatch, run_not_waiting). */
  readonly code?: string;
  constructor(status: number, message: string, field?: string, rule?: string, clock?: number, code?: string) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.field = field;
    this.rule = rule;
    this.clock = clock;
    this.code = code;
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
/**
 * 507 disk_full: the server's disk is full; nothing was written. Free
 * space on the server and send the write again.
 */
export class DiskFullError extends SplError {}

/** The cancel request of a run, as the server answers it. */
export interface RunCancel {
  reason: string;
  /** Who cancelled the run (a DID). */
  actor: string;
  /** The id of the cancel request's record. */
  request: string;
  clock: number;
}

/**
 * 409 run_cancelled: someone cancelled the run (spl run cancel, POST
 * /v1/runs/{run}/cancel). Nothing was written; the runner stops and may
 * finish the run with state "cancelled".
 */
export class RunCancelledError extends ConflictError {
  readonly reason: string;
  /** Who cancelled the run. */
  readonly actor: string;
  /** The id of the cancel request's record. */
  readonly request?: string;
  /** The clock of the cancel request. */
  readonly requestClock?: number;
  constructor(message: string, cancel: Partial<RunCancel> = {}, field?: string, rule?: string) {
    super(409, message, field, rule, undefined, "run_cancelled");
    this.reason = cancel.reason ?? "";
    this.actor = cancel.actor ?? "";
    this.request = cancel.request;
    this.requestClock = cancel.clock;
  }
}

/** 409 run_finished: the run has its run_terminal checkpoint (or this Run was finished or closed); nothing was written. */
export class RunFinishedError extends ConflictError {
  constructor(message: string, field?: string, rule?: string) {
    super(409, message, field, rule, undefined, "run_finished");
  }
}

/**
 * 409 effect_mismatch: a result is recorded for the call id with another
 * input hash (the determinism check). `rerun: true` runs the tool again.
 */
export class EffectMismatchError extends ConflictError {
  /** The input hash recorded. */
  readonly recorded: string;
  /** The input hash of this call. */
  readonly got: string;
  /** The tool of the recorded result. */
  readonly recordedTool: string;
  constructor(message: string, m: { recorded?: string; got?: string; recordedTool?: string } = {}, field?: string, rule?: string) {
    super(409, message, field, rule, undefined, "effect_mismatch");
    this.recorded = m.recorded ?? "";
    this.got = m.got ?? "";
    this.recordedTool = m.recordedTool ?? "";
  }
}

/**
 * 409 run_not_waiting: a signal to a run that is not waiting for it (it
 * waits for another name, for none, or the wait took a signal already:
 * a second signal for one wait is refused). Nothing was written.
 */
export class RunNotWaitingError extends ConflictError {
  constructor(message: string, field?: string, rule?: string) {
    super(409, message, field, rule, undefined, "run_not_waiting");
  }
}

/**
 * StillWaitingError: Run.awaitSignal's wait ended (its timeoutMs passed;
 * 0: it did not wait) before the signal came. Nothing failed: the run
 * stays waiting (status "waiting"), this process may end, and a run
 * opened after the signal was sent continues with it (Run.signal,
 * awaitSignal resolving at once). Not an answer of the server, so not a
 * SplError.
 */
export class StillWaitingError extends Error {
  readonly run: string;
  /** The name of the signal the run waits for. */
  readonly signal: string;
  /** How long awaitSignal waited for it. */
  readonly timeoutMs: number;
  constructor(run: string, signal: string, timeoutMs: number) {
    super(`spl: run ${JSON.stringify(run)}: still waiting for signal ${JSON.stringify(signal)}${timeoutMs > 0 ? ` after ${timeoutMs} ms` : ""}: the run stays waiting and this process may end; a run opened after the signal continues with it`);
    this.name = new.target.name;
    this.run = run;
    this.signal = signal;
    this.timeoutMs = timeoutMs;
  }
}

/** A checkpoint of a run that did not land, and why. */
export interface UnlandedCheckpoint {
  phase: string;
  error: unknown;
}

/**
 * UnlandedError reports checkpoints of a run queued write-behind that did
 * not land (each with its error: an InvalidError naming the field, a
 * RunCancelledError, …), and, when the wait was bounded by the flush
 * timeout, how many were still on their way. From Run.finish, `report`
 * is what the finish wrote, when it did.
 */
export class UnlandedError extends Error {
  readonly run: string;
  readonly failures: UnlandedCheckpoint[];
  /** Queued and not yet settled when the wait ended (> 0 only when timedOut). */
  readonly pending: number;
  readonly timedOut: boolean;
  /** From finish: the run_terminal checkpoint written, beside the failures. */
  readonly report?: FinishReport;
  constructor(run: string, failures: UnlandedCheckpoint[], o: { pending?: number; timedOut?: boolean; timeoutMs?: number; report?: FinishReport } = {}) {
    const parts: string[] = [];
    if (failures.length) {
      const first = failures.slice(0, 5).map((f) => `${f.phase}: ${f.error instanceof Error ? f.error.message : String(f.error)}`);
      parts.push(`${failures.length} checkpoint${failures.length === 1 ? "" : "s"} did not land (${first.join("; ")}${failures.length > 5 ? "; …" : ""})`);
    }
    if (o.timedOut) parts.push(`${o.pending ?? 0} not yet durable after ${o.timeoutMs ?? "the flush timeout"} ms`);
    super(`spl: run ${JSON.stringify(run)}: ${parts.join("; ")}`);
    this.name = new.target.name;
    this.run = run;
    this.failures = failures;
    this.pending = o.pending ?? 0;
    this.timedOut = o.timedOut ?? false;
    this.report = o.report;
  }
  /** The cancel that refused some of the checkpoints, if one did. */
  get cancelled(): RunCancelledError | undefined {
    return this.failures.map((f) => f.error).find((e): e is RunCancelledError => e instanceof RunCancelledError);
  }
}

/** The body of an error answer. */
interface ErrorBody {
  error?: string;
  field?: string;
  rule?: string;
  clock?: number;
  code?: string;
  cancel?: Partial<RunCancel> | null;
  recorded?: string;
  got?: string;
  recorded_tool?: string;
}

/** errorOf maps an error answer to its class. */
export function errorOf(status: number, body: ErrorBody | undefined): SplError {
  const msg = body?.error ?? `HTTP ${status}`;
  const code = typeof body?.code === "string" ? body.code : undefined;
  const args = [status, msg, body?.field, body?.rule, body?.clock, code] as const;
  switch (status) {
    case 400: case 413: return new InvalidError(...args);
    case 401: return new UnauthorizedError(...args);
    case 403: return new ForbiddenError(...args);
    case 404: return new NotFoundError(...args);
    case 409:
      switch (code) {
        case "run_cancelled": return new RunCancelledError(msg, body?.cancel ?? {}, body?.field, body?.rule);
        case "run_finished": return new RunFinishedError(msg, body?.field, body?.rule);
        case "run_not_waiting": return new RunNotWaitingError(msg, body?.field, body?.rule);
        case "effect_mismatch":
          return new EffectMismatchError(msg, { recorded: body?.recorded, got: body?.got, recordedTool: body?.recorded_tool }, body?.field, body?.rule);
      }
      return new ConflictError(...args);
    case 503: return new UnavailableError(...args);
    case 507: return new DiskFullError(...args);
  }
  return new SplError(...args);
}
