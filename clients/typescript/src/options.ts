/** The options of the client and of its calls. */
import type * as grpc from "@grpc/grpc-js";
import type { FilterLike, SearchOptions } from "./requests";
import type { RetryPolicy } from "./retry";

/** Options every call takes. */
export interface CallOptions {
  /** This call's deadline in ms, retries included (default: the client's `timeoutMs`). */
  timeoutMs?: number;
  /** This call's retry policy (default: the client's). */
  retry?: RetryPolicy;
  /** Cancels the call (it rejects with a {@link CancelledError}); no retry follows. */
  signal?: AbortSignal;
}

/** Options of a mutating call that takes an idempotency key. */
export interface KeyedCallOptions extends CallOptions {
  /** Your own key (1-128 of [A-Za-z0-9._:~-], e.g. a UUID), to repeat a call safely across restarts of your
   * process; by default a fresh one per call, the same on each of its retries. */
  idempotencyKey?: string;
}

/** How a client connects. */
export interface ClientOptions {
  /** The API key, sent as `authorization: Bearer <key>` on every call. */
  key?: string;
  /** Each call's deadline in ms, retries included (default 30 000). */
  timeoutMs?: number;
  /** Which failures are retried and how (default: `new RetryPolicy()`). */
  retry?: RetryPolicy;
  /** TLS or other channel credentials (default: plaintext). */
  credentials?: grpc.ChannelCredentials;
  /** Extra grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
  /** Waits between retries (tests replace it). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Options of {@link EngramClient.recall}: search options and these. */
export type RecallOptions = SearchOptions & CallOptions & {
  /** Hits to return (default 5). */
  topK?: number;
  /** At most this many items in the context block (default: `topK`). */
  contextItems?: number;
  /** Also pending (low-confidence) memories. */
  includePending?: boolean;
  /** Drop hits whose final score is below this (default 0). */
  minScore?: number;
  /** The recall gate (default on): small talk comes back at once with no hits (`Recall.skipped` says why). */
  gate?: boolean;
};

/** Options of {@link EngramClient.forget}. */
export interface ForgetOptions extends KeyedCallOptions {
  /** Which memories (statuses empty: ACTIVE and PENDING when archiving, every status when deleting). */
  filter?: FilterLike;
  /** Only memories created more than this long ago; 0: no age bound. */
  olderThanMs?: number;
  /** Purge (store, indexes, history links) instead of archiving. */
  delete?: boolean;
  /** Pinned memories too (skipped otherwise). */
  includePinned?: boolean;
  /** Required when the filter and `olderThanMs` select nothing narrower. */
  all?: boolean;
  /** Count and list, change nothing. */
  dryRun?: boolean;
}
