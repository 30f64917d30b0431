/**
 * Typed errors: every failed call rejects with an {@link EngramError} whose class names the gRPC status
 * the server answered with (the server maps its domain errors to these codes in one table:
 * invalid → INVALID_ARGUMENT, unknown tenant or memory → NOT_FOUND, not allowed → PERMISSION_DENIED,
 * no or unknown credential → UNAUTHENTICATED, overload or full disk → RESOURCE_EXHAUSTED,
 * not ready → UNAVAILABLE).
 */
import { Metadata, status as Status, type ServiceError } from "@grpc/grpc-js";

/** The base of every error a call rejects with; `code` is the gRPC status code (`Status.NOT_FOUND`, ...). */
export class EngramError extends Error {
  /** The gRPC status code, e.g. `Status.INVALID_ARGUMENT` (3). */
  readonly code: Status;
  /** The status code's name, e.g. `"INVALID_ARGUMENT"`. */
  readonly codeName: string;
  /** The server's message (the status details), without the code. */
  readonly details: string;
  /** The trailing metadata the server sent with the status. */
  readonly metadata: Metadata;
  /** The RPC that failed, e.g. `"Write"`; empty when unknown. */
  readonly method: string;

  constructor(code: Status, details: string, options: { metadata?: Metadata; method?: string; cause?: unknown } = {}) {
    const codeName = Status[code] ?? `CODE_${code}`;
    super(`${options.method ? `${options.method}: ` : ""}${codeName}: ${details}`, { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.metadata = options.metadata ?? new Metadata();
    this.method = options.method ?? "";
  }
}

/** CANCELLED: the call was cancelled (e.g. its `AbortSignal` fired). */
export class CancelledError extends EngramError {}
/** INVALID_ARGUMENT: the request is malformed or breaks a limit; nothing was changed. */
export class InvalidArgumentError extends EngramError {}
/** DEADLINE_EXCEEDED: the call's deadline (`timeoutMs`) passed, retries included. */
export class DeadlineExceededError extends EngramError {}
/** NOT_FOUND: an unknown tenant or memory. */
export class NotFoundError extends EngramError {}
/** ALREADY_EXISTS: e.g. creating a tenant that exists. */
export class AlreadyExistsError extends EngramError {}
/** PERMISSION_DENIED: the key is valid but does not cover this tenant or call. */
export class PermissionDeniedError extends EngramError {}
/** RESOURCE_EXHAUSTED: the server is over capacity (or its disk is full); back off and retry later. */
export class ResourceExhaustedError extends EngramError {}
/** FAILED_PRECONDITION: the call is not possible in the current state. */
export class FailedPreconditionError extends EngramError {}
/** UNIMPLEMENTED: the server does not offer this RPC (an older server). */
export class UnimplementedError extends EngramError {}
/** INTERNAL: a server fault; the message is generic, the server logs the details with the request id. */
export class InternalError extends EngramError {}
/** UNAVAILABLE: the server could not be reached or is not ready (after the retries the policy allows). */
export class UnavailableError extends EngramError {}
/** UNAUTHENTICATED: no key, or an unknown or revoked one. */
export class UnauthenticatedError extends EngramError {}

type ErrorClass = new (code: Status, details: string, options?: { metadata?: Metadata; method?: string; cause?: unknown }) => EngramError;

const BY_CODE: ReadonlyMap<Status, ErrorClass> = new Map<Status, ErrorClass>([
  [Status.CANCELLED, CancelledError],
  [Status.INVALID_ARGUMENT, InvalidArgumentError],
  [Status.DEADLINE_EXCEEDED, DeadlineExceededError],
  [Status.NOT_FOUND, NotFoundError],
  [Status.ALREADY_EXISTS, AlreadyExistsError],
  [Status.PERMISSION_DENIED, PermissionDeniedError],
  [Status.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [Status.FAILED_PRECONDITION, FailedPreconditionError],
  [Status.UNIMPLEMENTED, UnimplementedError],
  [Status.INTERNAL, InternalError],
  [Status.UNAVAILABLE, UnavailableError],
  [Status.UNAUTHENTICATED, UnauthenticatedError],
]);

/** The typed error for a grpc-js `ServiceError` (the class of its status code; {@link EngramError} for the rest). */
export function errorFromStatus(error: Partial<ServiceError> & { code: Status }, method = ""): EngramError {
  const Class = BY_CODE.get(error.code) ?? EngramError;
  return new Class(error.code, error.details ?? error.message ?? "", { metadata: error.metadata, method, cause: error });
}
