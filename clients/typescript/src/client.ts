/**
 * The engram client: one channel, the bearer key on every call, a deadline on every call, idempotency keys on
 * every mutating call that takes one, and safe retries ({@link RetryPolicy}). The same calls as the Python SDK's
 * `EngramClient` / `AsyncEngramClient`, awaited.
 */
import { setTimeout as sleepMs } from "node:timers/promises";
import { debuglog } from "node:util";
import * as grpc from "@grpc/grpc-js";

import { CancelledError, errorFromStatus } from "./errors";
import type { Memory, QueryResult } from "./gen/engram/v1/messages";
import {
  AdminServiceService, type AuditEntry, type AuditOp, type AuditResponse, type ConfirmResponse,
  type ConsolidateResponse, type CreateKeyResponse, type CreateTenantResponse, type DeleteResponse,
  type DeleteTenantResponse, ForgetMode, type ForgetResponse, type ExtractResponse, type GetResponse,
  type HistoryResponse, type InfoResponse, type ListResponse, MemoryServiceService, type RevokeKeyResponse,
  type RotateKeyResponse, type SettingsResponse, type StatsResponse, type TouchResponse, type WriteResponse,
  type WriteResult,
} from "./gen/engram/v1/service";
import {
  type ConversationOptions, type ConversationTurn, conversationInputs, enumValue, type FilterLike, memoryFilter,
  memoryInput, type MemoryInputLike, type MemoryLike, Recall, recallFrom, searchQuery, type SearchOptions,
  writeInputs,
} from "./requests";
import type { CallOptions, ClientOptions, ForgetOptions, KeyedCallOptions, RecallOptions } from "./options";
import { Attempts, newIdempotencyKey, newRequestId, READS, RetryPolicy } from "./retry";

const debug = debuglog("engram");

/** Where the client connects when no address is given. */
export const DEFAULT_ADDRESS = "127.0.0.1:50051";
/** Each call's deadline, retries included, unless the client or the call sets another. */
export const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Every RPC of engram.v1, by the generated service definitions' method name (`write`, `createTenant`, ...). */
export const RPCS = { ...MemoryServiceService, ...AdminServiceService };
/** An RPC's method name as the generated definitions spell it. */
export type RpcName = keyof typeof RPCS;
/** The request message of an RPC. */
export type RequestOf<M extends RpcName> = Parameters<(typeof RPCS)[M]["requestSerialize"]>[0];
/** The response message of an RPC. */
export type ResponseOf<M extends RpcName> = ReturnType<(typeof RPCS)[M]["responseDeserialize"]>;

/** The RPCs whose request has an idempotency key (read from the generated messages: Write, Delete, Forget,
 * Confirm, and any RPC that gains the field later). */
export const KEYED_RPCS: ReadonlySet<RpcName> = new Set(
  (Object.keys(RPCS) as RpcName[]).filter((m) => "idempotencyKey" in (RPCS[m].requestDeserialize(Buffer.alloc(0)) as object)),
);

function splitCall<T extends CallOptions>(options: T): [CallOptions, Omit<T, keyof CallOptions>] {
  const { timeoutMs, retry, signal, ...rest } = options;
  return [{ timeoutMs, retry, signal }, rest];
}

function isServiceError(error: unknown): error is grpc.ServiceError {
  return error instanceof Error && typeof (error as Partial<grpc.ServiceError>).code === "number";
}

/** Every item of a paged RPC, page after page until `nextPageToken` is empty. */
async function* pages<P extends { nextPageToken: string }, T>(page: (pageToken: string) => Promise<P>,
  items: (page: P) => T[]): AsyncGenerator<T> {
  let pageToken = "";
  do {
    const got = await page(pageToken);
    yield* items(got);
    pageToken = got.nextPageToken;
  } while (pageToken);
}

async function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  await sleepMs(ms, undefined, signal ? { signal } : undefined);
}

/**
 * An engram client. Every method returns a promise; a failed call rejects with an `EngramError` subclass named
 * after its gRPC status (`NotFoundError`, `InvalidArgumentError`, ...).
 *
 * ```ts
 * const engram = new EngramClient("127.0.0.1:50051", { key: process.env.ENGRAM_KEY });
 * await engram.remember("acme/alice", "Alice is allergic to peanuts", { type: "semantic", importance: 0.9 });
 * const recalled = await engram.recall("acme/alice", "what should I not cook for Alice?");
 * console.log(recalled.context);
 * engram.close();
 * ```
 */
export class EngramClient {
  /** The server's `host:port`. */
  readonly address: string;
  /** The API key sent with every call ("" sends none). */
  readonly key: string;
  /** Each call's default deadline in ms. */
  readonly timeoutMs: number;
  /** The default retry policy. */
  readonly retry: RetryPolicy;
  private readonly channel: grpc.Client;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(address: string = DEFAULT_ADDRESS, options: ClientOptions = {}) {
    this.address = address;
    this.key = options.key ?? "";
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new RangeError("timeoutMs must be > 0");
    this.retry = options.retry ?? new RetryPolicy();
    this.sleep = options.sleep ?? defaultSleep;
    this.channel = new grpc.Client(address, options.credentials ?? grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
      ...options.channelOptions,
    });
  }

  /**
   * A client configured from the environment, as the Python SDK and CLI read it: `ENGRAM_ADDRESS`,
   * `ENGRAM_KEY` (or `ENGRAM_ADMIN_KEY`), `ENGRAM_TIMEOUT_S` (seconds); `options` take precedence.
   */
  static fromEnv(options: ClientOptions & { address?: string } = {}, env: NodeJS.ProcessEnv = process.env): EngramClient {
    const { address, ...rest } = options;
    let timeoutMs = rest.timeoutMs;
    if (timeoutMs === undefined && env.ENGRAM_TIMEOUT_S) {
      timeoutMs = Number(env.ENGRAM_TIMEOUT_S) * 1000;
      if (!Number.isFinite(timeoutMs)) throw new RangeError(`ENGRAM_TIMEOUT_S is not a number: ${JSON.stringify(env.ENGRAM_TIMEOUT_S)}`);
    }
    return new EngramClient(address || env.ENGRAM_ADDRESS || DEFAULT_ADDRESS, {
      ...rest,
      key: rest.key || env.ENGRAM_KEY || env.ENGRAM_ADMIN_KEY || "",
      timeoutMs,
    });
  }

  /** The same client (channel, deadline, retries) calling with another key, e.g. one service acting for many
   * users' keys. It shares the channel: close only the original. */
  withKey(key: string): EngramClient {
    const other = Object.create(EngramClient.prototype) as EngramClient;
    Object.assign(other, this, { key });
    return other;
  }

  /** Closes the channel; calls after it fail. */
  close(): void {
    this.channel.close();
  }

  // -- the one place that calls the network ------------------------------------------------------------

  /**
   * Any RPC by its method name (`"write"`, `"createTenant"`, ...) with a complete request message, with the key,
   * the deadline and retries. A request of Write, Delete, Forget or Confirm without an idempotency key gets a
   * fresh one (on a copy: the caller's object is left as it is), the same for all its retries.
   */
  async call<M extends RpcName>(method: M, request: RequestOf<M>, options: CallOptions = {}): Promise<ResponseOf<M>> {
    const rpc = RPCS[method];
    if (rpc === undefined) throw new RangeError(`no RPC named ${JSON.stringify(method)}; known: ${Object.keys(RPCS).sort().join(", ")}`);
    const name = rpc.path.slice(rpc.path.lastIndexOf("/") + 1);
    const keyed = KEYED_RPCS.has(method);
    let sent: RequestOf<M> = request;
    if (keyed && !(request as { idempotencyKey: string }).idempotencyKey) {
      sent = { ...request, idempotencyKey: newIdempotencyKey() };
    }
    const attempts = new Attempts(options.retry ?? this.retry, options.timeoutMs ?? this.timeoutMs,
      keyed || READS.has(name));
    const requestId = newRequestId();
    for (;;) {
      const timeoutMs = attempts.nextTimeoutMs();
      try {
        return (await this.unary(rpc, sent, requestId, timeoutMs, options.signal)) as ResponseOf<M>;
      } catch (error) {
        if (!isServiceError(error)) throw error;
        const delay = options.signal?.aborted ? null : attempts.delayAfter(error.code);
        if (delay === null) throw errorFromStatus(error, name);
        debug("%s: %s, retry %d in %d ms", name, grpc.status[error.code], attempts.attempt, Math.round(delay));
        try {
          await this.sleep(delay, options.signal);
        } catch (cause) {
          throw new CancelledError(grpc.status.CANCELLED, "cancelled while waiting to retry", { method: name, cause });
        }
      }
    }
  }

  private unary(rpc: (typeof RPCS)[RpcName], request: unknown, requestId: string, timeoutMs: number,
    signal?: AbortSignal): Promise<unknown> {
    const metadata = new grpc.Metadata();
    metadata.set("x-request-id", requestId);
    if (this.key) metadata.set("authorization", `Bearer ${this.key}`);
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(Object.assign(new Error("cancelled"), { code: grpc.status.CANCELLED, details: "cancelled before it started" }));
        return;
      }
      const onAbort = (): void => call.cancel();
      const call = this.channel.makeUnaryRequest(
        rpc.path, rpc.requestSerialize as (value: unknown) => Buffer, rpc.responseDeserialize as (bytes: Buffer) => unknown,
        request, metadata, { deadline: new Date(Date.now() + timeoutMs) },
        (error, value) => {
          signal?.removeEventListener("abort", onAbort);
          if (error) reject(error);
          else resolve(value);
        },
      );
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  // -- MemoryService -----------------------------------------------------------------------------------

  /** The server's version, models, limits, batching and ranking constants. */
  info(options: CallOptions = {}): Promise<InfoResponse> {
    return this.call("info", {}, options);
  }

  /**
   * Writes memories (strings or {@link MemoryInputLike} objects) in one call, durably; one result per memory, in
   * order (CREATED, MERGED into a near-duplicate, PENDING below the confidence threshold, or SKIPPED).
   * `common`: fields every memory gets unless it sets them itself.
   */
  write(tenantId: string, memories: Iterable<MemoryLike>,
    options: KeyedCallOptions & { common?: MemoryInputLike } = {}): Promise<WriteResponse> {
    const [call, { idempotencyKey = "", common }] = splitCall(options);
    return this.call("write", { tenantId, memories: writeInputs(memories, common), idempotencyKey }, call);
  }

  /** One query: the hits (each with its score breakdown), the timings and, with `contextBlock: true`, a
   * prompt-ready context block. */
  async search(tenantId: string, text: string, options: SearchOptions & CallOptions = {}): Promise<QueryResult> {
    const [call, query] = splitCall(options);
    const reply = await this.call("search", { tenantId, queries: [searchQuery(text, query)] }, call);
    return reply.results[0];
  }

  /** Several queries in one call (texts with the shared `options`, or `{ text, ...options }` objects); one
   * result per query, in order. */
  async searchMany(tenantId: string, queries: ReadonlyArray<string | (SearchOptions & { text: string })>,
    options: SearchOptions & CallOptions = {}): Promise<QueryResult[]> {
    const [call, shared] = splitCall(options);
    const built = queries.map((q) => {
      if (typeof q === "string") return searchQuery(q, shared);
      const { text, ...own } = q;
      return searchQuery(text, own);
    });
    return (await this.call("search", { tenantId, queries: built }, call)).results;
  }

  /** Memories by id: the found ones in request order, and the ids not found in `missing`. */
  get(tenantId: string, memoryIds: readonly string[], options: CallOptions = {}): Promise<GetResponse> {
    return this.call("get", { tenantId, memoryIds: [...memoryIds] }, options);
  }

  /** Deletes memories by id (purged from the store and the indexes). */
  delete(tenantId: string, memoryIds: readonly string[], options: KeyedCallOptions = {}): Promise<DeleteResponse> {
    const [call, { idempotencyKey = "" }] = splitCall(options);
    return this.call("delete", { tenantId, memoryIds: [...memoryIds], idempotencyKey }, call);
  }

  /** One page of the tenant's memories (every status when the filter sets none); `nextPageToken` is "" on the last. */
  listPage(tenantId: string, options: CallOptions & { filter?: FilterLike; pageSize?: number; pageToken?: string } = {}
  ): Promise<ListResponse> {
    const [call, { filter, pageSize = 0, pageToken = "" }] = splitCall(options);
    return this.call("list", { tenantId, filter: memoryFilter(filter), pageSize, pageToken }, call);
  }

  /** Every memory the filter matches, page by page: `for await (const m of engram.iterMemories(tenant))`. */
  async *iterMemories(tenantId: string, options: CallOptions & { filter?: FilterLike; pageSize?: number } = {}
  ): AsyncGenerator<Memory> {
    yield* pages((pageToken) => this.listPage(tenantId, { pageSize: 100, ...options, pageToken }), (p) => p.memories);
  }

  // -- agent helpers -----------------------------------------------------------------------------------

  /** Before answering: the memories that matter for `text` and a prompt-ready context block. */
  async recall(tenantId: string, text: string, options: RecallOptions = {}): Promise<Recall> {
    const [call, { topK = 5, contextItems = 0, minScore = 0, gate = true, includePending = false, ...rest }] =
      splitCall(options);
    const query = searchQuery(text, { ...rest, topK, contextBlock: true, contextItems: contextItems || topK, includePending, gate });
    const reply = await this.call("search", { tenantId, queries: [query] }, call);
    return recallFrom(reply.results[0], minScore);
  }

  /** After answering: stores what was learned as one memory (default type episodic); its write result. */
  async remember(tenantId: string, content: string, options: Omit<MemoryInputLike, "content"> & CallOptions = {}
  ): Promise<WriteResult> {
    const [call, fields] = splitCall(options);
    const memory = memoryInput({ ...fields, type: fields.type ?? "episodic", content });
    return (await this.call("write", { tenantId, memories: [memory], idempotencyKey: "" }, call)).results[0];
  }

  /** A conversation, one EPISODIC memory per turn with the previous turn as its context (see
   * `conversationInputs`); the server heads each with its date when indexing. */
  writeConversation(tenantId: string, turns: Iterable<ConversationTurn>,
    options: ConversationOptions & KeyedCallOptions = {}): Promise<WriteResponse> {
    const [call, { idempotencyKey = "", ...conversation }] = splitCall(options);
    return this.call("write", { tenantId, memories: conversationInputs(turns, conversation), idempotencyKey }, call);
  }

  // -- memory lifecycle --------------------------------------------------------------------------------

  /** The supersede chain of a memory, oldest first, and the id of its latest version. */
  history(tenantId: string, memoryId: string, options: CallOptions = {}): Promise<HistoryResponse> {
    return this.call("history", { tenantId, memoryId }, options);
  }

  /** Activates PENDING memories (written below the confidence threshold). */
  confirm(tenantId: string, memoryIds: readonly string[], options: KeyedCallOptions = {}): Promise<ConfirmResponse> {
    const [call, { idempotencyKey = "" }] = splitCall(options);
    return this.call("confirm", { tenantId, memoryIds: [...memoryIds], idempotencyKey }, call);
  }

  /** Marks memories as used (e.g. the ones put into a prompt): one access each, what recency reads. */
  touch(tenantId: string, memoryIds: readonly string[], options: CallOptions = {}): Promise<TouchResponse> {
    return this.call("touch", { tenantId, memoryIds: [...memoryIds] }, options);
  }

  /** Archives (default) or purges (`delete: true`) the memories a filter selects. */
  forget(tenantId: string, options: ForgetOptions = {}): Promise<ForgetResponse> {
    const [call, f] = splitCall(options);
    return this.call("forget", {
      tenantId, filter: memoryFilter(f.filter), olderThanMs: f.olderThanMs ?? 0,
      mode: f.delete ? ForgetMode.FORGET_MODE_DELETE : ForgetMode.FORGET_MODE_ARCHIVE,
      includePinned: f.includePinned ?? false, all: f.all ?? false, dryRun: f.dryRun ?? false,
      idempotencyKey: f.idempotencyKey ?? "",
    }, call);
  }

  /** Folds repeated episodic memories into semantic ones now. */
  consolidate(tenantId: string, options: CallOptions & { dryRun?: boolean } = {}): Promise<ConsolidateResponse> {
    const [call, { dryRun = false }] = splitCall(options);
    return this.call("consolidate", { tenantId, dryRun }, call);
  }

  /** Runs the server's configured extractor on a conversation's recent turns now. */
  extract(tenantId: string, options: CallOptions & { conversation?: string; turns?: number } = {}): Promise<ExtractResponse> {
    const [call, { conversation = "", turns = 0 }] = splitCall(options);
    return this.call("extract", { tenantId, conversation, turns }, call);
  }

  /** The tenant's own settings (`settings`; unset fields follow the server) and `effective`: what applies. */
  getSettings(tenantId: string, options: CallOptions = {}): Promise<SettingsResponse> {
    return this.call("getSettings", { tenantId }, options);
  }

  /** Per-tenant settings, applied together or not at all: `minSalience` skips writes below it (0 = never);
   * `reset: ["min_salience"]` returns to the server's default. */
  updateSettings(tenantId: string, options: CallOptions & { minSalience?: number; reset?: string[] } = {}
  ): Promise<SettingsResponse> {
    const [call, { minSalience, reset = [] }] = splitCall(options);
    return this.call("updateSettings", { tenantId, settings: { minSalience }, reset }, call);
  }

  /** One page of the tenant's audit log, oldest first; `ops` by name (`"write"`, `"search"`) or value. */
  auditPage(tenantId: string, options: CallOptions & { ops?: (AuditOp | string)[]; memoryId?: string;
    pageSize?: number; pageToken?: string } = {}): Promise<AuditResponse> {
    const [call, { ops = [], memoryId = "", pageSize = 0, pageToken = "" }] = splitCall(options);
    return this.call("audit", { tenantId, ops: ops.map((op) => enumValue("AuditOp", op)), memoryId, pageSize, pageToken }, call);
  }

  /** The tenant's whole audit log, oldest first, page by page. */
  async *iterAudit(tenantId: string, options: CallOptions & { ops?: (AuditOp | string)[]; memoryId?: string;
    pageSize?: number } = {}): AsyncGenerator<AuditEntry> {
    yield* pages((pageToken) => this.auditPage(tenantId, { pageSize: 100, ...options, pageToken }), (p) => p.entries);
  }

  // -- AdminService (an admin key) ---------------------------------------------------------------------

  /** Creates a tenant, optionally with initial memories or a template tenant's ACTIVE memories. */
  createTenant(tenantId: string, options: CallOptions & { initial?: Iterable<MemoryLike>; templateTenantId?: string } = {}
  ): Promise<CreateTenantResponse> {
    const [call, { initial = [], templateTenantId = "" }] = splitCall(options);
    return this.call("createTenant", { tenantId, initialMemories: Array.from(initial, memoryInput), templateTenantId }, call);
  }

  /** Every tenant id. */
  async listTenants(options: CallOptions = {}): Promise<string[]> {
    return (await this.call("listTenants", {}, options)).tenantIds;
  }

  /** A new key covering `tenantIds` exactly and every tenant under `prefixes` (each ends with "/"), or an
   * admin key; its `secret` is shown once. */
  createKey(name: string, options: CallOptions & { tenantIds?: string[]; prefixes?: string[]; admin?: boolean } = {}
  ): Promise<CreateKeyResponse> {
    const [call, { tenantIds = [], prefixes = [], admin = false }] = splitCall(options);
    return this.call("createKey", { name, tenantIds, tenantPrefixes: prefixes, admin }, call);
  }

  /** Revokes a key: it stops working at once. */
  revokeKey(keyId: string, options: CallOptions = {}): Promise<RevokeKeyResponse> {
    return this.call("revokeKey", { keyId }, options);
  }

  /** A new secret for a key (same id and scope); the old one stops working. */
  rotateKey(keyId: string, options: CallOptions = {}): Promise<RotateKeyResponse> {
    return this.call("rotateKey", { keyId }, options);
  }

  /** Purges a tenant and all its data. */
  deleteTenant(tenantId: string, options: CallOptions = {}): Promise<DeleteTenantResponse> {
    return this.call("deleteTenant", { tenantId }, options);
  }

  /** Loaded tenants, index tiers, memory budget and storage ("" = every loaded tenant). */
  stats(tenantId = "", options: CallOptions = {}): Promise<StatsResponse> {
    return this.call("stats", { tenantId }, options);
  }
}
