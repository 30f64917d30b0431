/**
 * Which calls are retried, how long to wait between attempts, and the idempotency key that makes a retried
 * write safe: the same rules as engram's Python SDK (`engram_client._core`).
 */
import { randomBytes } from "node:crypto";
import { status as Status } from "@grpc/grpc-js";

/** Options of a {@link RetryPolicy}; every field has the Python SDK's default. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 5; 1 turns retries off). */
  maxAttempts?: number;
  /** The first backoff's upper bound (default 100 ms). */
  initialBackoffMs?: number;
  /** The upper bound no backoff exceeds (default 2000 ms). */
  maxBackoffMs?: number;
  /** Growth of the bound per retry (default 2). */
  multiplier?: number;
  /** Retried for safe calls: reads and keyed writes (default UNAVAILABLE and DEADLINE_EXCEEDED). */
  codes?: Iterable<Status>;
  /** Retried for mutating calls without an idempotency key (default UNAVAILABLE only). */
  unkeyedCodes?: Iterable<Status>;
  /** A deadline per attempt, so that one hung attempt leaves time for another (default: none; each
   * attempt gets what is left of the call's `timeoutMs`). */
  attemptTimeoutMs?: number | null;
}

/**
 * Exponential backoff with full jitter, on the listed status codes only, at most `maxAttempts` attempts;
 * the call's `timeoutMs` bounds the whole call, retries included.
 *
 * An UNAVAILABLE or DEADLINE_EXCEEDED call has an unknown outcome: the server may have applied it before the
 * answer was lost. So `codes` are retried only for calls that are safe to repeat: reads, and the mutating
 * calls that carry an idempotency key (Write, Delete, Forget, Confirm: the client puts a fresh key on each,
 * kept across its retries, so the server applies it once and answers the retry with the first answer). The
 * other mutating calls (CreateTenant, CreateKey, Touch, ...) have no key: they are retried on `unkeyedCodes`
 * only, never on a deadline. INVALID_ARGUMENT, NOT_FOUND and the like are never retried.
 */
export class RetryPolicy {
  readonly maxAttempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly multiplier: number;
  readonly codes: ReadonlySet<Status>;
  readonly unkeyedCodes: ReadonlySet<Status>;
  readonly attemptTimeoutMs: number | null;

  constructor(options: RetryOptions = {}) {
    this.maxAttempts = options.maxAttempts ?? 5;
    this.initialBackoffMs = options.initialBackoffMs ?? 100;
    this.maxBackoffMs = options.maxBackoffMs ?? 2000;
    this.multiplier = options.multiplier ?? 2;
    this.codes = new Set(options.codes ?? [Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED]);
    this.unkeyedCodes = new Set(options.unkeyedCodes ?? [Status.UNAVAILABLE]);
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? null;
    if (!(this.maxAttempts >= 1)) throw new RangeError("maxAttempts must be >= 1");
  }

  /** Delay before retry number `attempt` (1-based): uniform in [0, min(max, initial · multiplier^(attempt-1))]. */
  backoffMs(attempt: number, random: () => number = Math.random): number {
    const cap = Math.min(this.maxBackoffMs, this.initialBackoffMs * this.multiplier ** (attempt - 1));
    return random() * cap;
  }

  /** Whether a call that failed with `code` on attempt number `attempt` is tried again. `idempotent`: the
   * call is safe to repeat (a read, or a mutating call with an idempotency key). */
  shouldRetry(code: Status, attempt: number, idempotent = true): boolean {
    return (idempotent ? this.codes : this.unkeyedCodes).has(code) && attempt < this.maxAttempts;
  }
}

/** One attempt only: nothing is retried. */
export const NO_RETRY = new RetryPolicy({ maxAttempts: 1 });

/** Calls that change nothing: safe to repeat without a key (a Search's access counts are a ranking signal). */
export const READS: ReadonlySet<string> = new Set([
  "Info", "Search", "Get", "List", "History", "Audit", "GetSettings", "ListTenants", "Stats",
]);

/** A fresh idempotency key: 32 hex characters (128 random bits), what the server accepts ([A-Za-z0-9._:~-], ≤ 128). */
export function newIdempotencyKey(): string {
  return randomBytes(16).toString("hex");
}

/** A fresh request id (16 hex characters), sent as `x-request-id`, the same on every retry of one call. */
export function newRequestId(): string {
  return randomBytes(8).toString("hex");
}

/**
 * One logical call's retry bookkeeping: each attempt gets what is left of the overall deadline (at most the
 * policy's `attemptTimeoutMs`).
 */
export class Attempts {
  readonly deadlineMs: number;
  attempt = 0;

  constructor(
    readonly policy: RetryPolicy,
    timeoutMs: number,
    readonly idempotent = true,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.deadlineMs = clock() + timeoutMs;
  }

  /** Starts the next attempt; its timeout in ms. */
  nextTimeoutMs(): number {
    this.attempt += 1;
    const left = Math.max(this.deadlineMs - this.clock(), 1);
    return this.policy.attemptTimeoutMs === null ? left : Math.min(left, this.policy.attemptTimeoutMs);
  }

  /** Milliseconds to wait before the next attempt, or `null` to give up (the error is final). */
  delayAfter(code: Status | undefined, random: () => number = Math.random): number | null {
    if (code === undefined || !this.policy.shouldRetry(code, this.attempt, this.idempotent)) return null;
    const delay = this.policy.backoffMs(this.attempt, random);
    return this.clock() + delay < this.deadlineMs ? delay : null;
  }
}
