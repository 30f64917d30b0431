/**
 * engram's TypeScript/Node.js client.
 *
 * {@link EngramClient} sends an idempotency key with every Write, Delete, Forget and Confirm and retries
 * UNAVAILABLE and DEADLINE_EXCEEDED with exponential backoff (applied once: the server answers a retry from its
 * record), puts a deadline on every call, pages through List, and offers the agent loop's two helpers: `recall`
 * before answering and `remember` after; {@link turn} runs the whole loop in one call. Failed calls reject with
 * an {@link EngramError} subclass named after the gRPC status. Every message type is generated from
 * proto/engram/v1 by ts-proto and exported here.
 *
 * @packageDocumentation
 */
export * as grpc from "@grpc/grpc-js";
export { status as Status } from "@grpc/grpc-js";
export {
  DEFAULT_ADDRESS, DEFAULT_TIMEOUT_MS, EngramClient, KEYED_RPCS, type RequestOf, type ResponseOf, RPCS, type RpcName,
} from "./client";
export type { CallOptions, ClientOptions, ForgetOptions, KeyedCallOptions, RecallOptions } from "./options";
export * from "./errors";
export * from "./gen/engram/v1/messages";
export * from "./gen/engram/v1/service";
export { type EndTurnOptions, endTurn, type Remembered, type Turn, turn, type TurnOptions } from "./loop";
export {
  contextFromHits, type ConversationOptions, type ConversationTurn, conversationInputs, enumValue, type FilterLike,
  memoryFilter, memoryInput, type MemoryInputLike, type MemoryLike, type MemoryStatusLike, type MemoryTypeLike,
  mergeInput, Recall, recallFrom, searchQuery, type SearchOptions, writeInputs,
} from "./requests";
export { Attempts, NO_RETRY, newIdempotencyKey, READS, RetryPolicy, type RetryOptions } from "./retry";
