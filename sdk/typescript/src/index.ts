export { connect, Client, SplRecord, type Checkpoint, type ConnectOptions, type EmitInput, type QueryOptions } from "./client.js";
export { SplError, InvalidError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError, UnavailableError } from "./errors.js";
export { CorruptRecordError, verifyEnvelope, idOfHeader, bodyDigest, type Header, type Verified } from "./verify.js";
