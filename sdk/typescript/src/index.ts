export { connect, Client, SplRecord, type Checkpoint, type ConnectOptions, type EmitInput, type QueryOptions } from "./client.js";
export { SplError, InvalidError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError, UnavailableError, DiskFullError,
  RunCancelledError, RunFinishedError, RunNotWaitingError, EffectMismatchError, StillWaitingError, UnlandedError, type RunCancel, type UnlandedCheckpoint } from "./errors.js";
export { Run, type RunStatus, type RunSignal, type AwaitSignalOptions, type RunCheckpoint, type RecordedEffect, type OpenRunOptions, type CheckpointOptions, type EffectOptions,
  type EffectResult, type FinishOptions, type FinishReport, type RunStats, type Receipt } from "./run.js";
export { CorruptRecordError, verifyEnvelope, idOfHeader, bodyDigest, type Header, type Verified } from "./verify.js";
