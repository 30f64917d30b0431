// The client's pure parts: the retry policy, request builders, context blocks and the error table.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Attempts, contextFromHits, conversationInputs, EngramClient, EngramError, enumValue, errorFromStatus,
  InvalidArgumentError, KEYED_RPCS, MemoryStatus, MemoryType, memoryFilter, memoryInput, NO_RETRY, NotFoundError,
  QueryResult, READS, recallFrom, ResourceExhaustedError, RetryPolicy, RPCS, searchQuery, Status,
  UnauthenticatedError, writeInputs,
} from "engram-grpc";

test("the retry policy's defaults and backoff are the Python SDK's", () => {
  const p = new RetryPolicy();
  assert.equal(p.maxAttempts, 5);
  assert.deepEqual([...p.codes].sort(), [Status.DEADLINE_EXCEEDED, Status.UNAVAILABLE].sort());
  assert.deepEqual([...p.unkeyedCodes], [Status.UNAVAILABLE]);
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((n) => p.backoffMs(n, () => 1)), [100, 200, 400, 800, 1600, 2000]);
  assert.equal(p.backoffMs(3, () => 0), 0);
  assert.ok(p.shouldRetry(Status.DEADLINE_EXCEEDED, 1, true));
  assert.ok(!p.shouldRetry(Status.DEADLINE_EXCEEDED, 1, false));
  assert.ok(p.shouldRetry(Status.UNAVAILABLE, 4, false));
  assert.ok(!p.shouldRetry(Status.UNAVAILABLE, 5, true));
  assert.ok(!p.shouldRetry(Status.INVALID_ARGUMENT, 1, true));
  assert.ok(!NO_RETRY.shouldRetry(Status.UNAVAILABLE, 1));
});

test("attempts share the call's deadline and stop when a backoff would pass it", () => {
  let now = 0;
  const attempts = new Attempts(new RetryPolicy({ attemptTimeoutMs: 300 }), 1000, true, () => now);
  assert.equal(attempts.nextTimeoutMs(), 300);
  now = 900;
  assert.equal(attempts.nextTimeoutMs(), 100);
  assert.equal(attempts.delayAfter(Status.UNAVAILABLE, () => 0.25), 50);   // attempt 2: uniform in [0, 200]
  assert.equal(attempts.delayAfter(Status.UNAVAILABLE, () => 0.5), null);   // 900 + 100 is the deadline
  assert.equal(attempts.delayAfter(Status.NOT_FOUND, () => 0), null);
});

test("the keyed RPCs come from the generated messages; reads are the Python SDK's", () => {
  for (const keyed of ["write", "delete", "forget", "confirm"] as const) assert.ok(KEYED_RPCS.has(keyed), keyed);
  for (const plain of ["search", "get", "touch", "createTenant", "createKey", "info"] as const) assert.ok(!KEYED_RPCS.has(plain), plain);
  assert.equal(READS.size, 9);
  const names = Object.values(RPCS).map((r) => r.path.slice(r.path.lastIndexOf("/") + 1));
  for (const read of READS) assert.ok(names.includes(read), read);
});

test("enum names, memory inputs and filters", () => {
  assert.equal(enumValue("MemoryType", "episodic"), MemoryType.MEMORY_TYPE_EPISODIC);
  assert.equal(enumValue("MemoryType", " SEMANTIC "), MemoryType.MEMORY_TYPE_SEMANTIC);
  assert.equal(enumValue("MemoryStatus", "MEMORY_STATUS_PENDING"), MemoryStatus.MEMORY_STATUS_PENDING);
  assert.equal(enumValue("MemoryType", 3), 3);
  assert.throws(() => enumValue("MemoryType", "dream"), /one of: episodic, semantic, procedural/);
  assert.throws(() => enumValue("MemoryType", "unspecified"), RangeError);
  assert.deepEqual(memoryInput("hi").content, "hi");
  const m = memoryInput({ content: "c", type: "procedural", importance: 0.3 });
  assert.equal(m.type, MemoryType.MEMORY_TYPE_PROCEDURAL);
  assert.equal(m.importance, 0.3);
  assert.equal(m.confidence, undefined);
  const f = memoryFilter({ types: ["episodic"], statuses: ["active", "pending"], scope: "work" });
  assert.deepEqual(f.types, [1]);
  assert.deepEqual(f.statuses, [1, 2]);
  assert.equal(f.scope, "work");
  const q = searchQuery("q", { topK: 3, scoring: { disableDecay: true }, filter: { entitiesAny: ["x"] } });
  assert.equal(q.topK, 3);
  assert.equal(q.scoring?.disableDecay, true);
  assert.deepEqual(q.filter?.entitiesAny, ["x"]);
});

test("common write fields apply under each memory's own, as protobuf's MergeFrom", () => {
  const [a, b] = writeInputs(["plain", { content: "own", type: "semantic", entities: ["b"], metadata: { k: "2" } }],
    { type: "episodic", sourceRef: "chat#1", entities: ["a"], metadata: { k: "1", j: "1" }, importance: 0.7 });
  assert.equal(a.type, MemoryType.MEMORY_TYPE_EPISODIC);
  assert.equal(a.sourceRef, "chat#1");
  assert.deepEqual(a.entities, ["a"]);
  assert.equal(b.content, "own");
  assert.equal(b.type, MemoryType.MEMORY_TYPE_SEMANTIC);
  assert.deepEqual(b.entities, ["a", "b"]);
  assert.deepEqual(b.metadata, { k: "2", j: "1" });
  assert.equal(b.importance, 0.7);
});

test("a conversation becomes episodic turns, each with the previous one as context", () => {
  const turns = conversationInputs([["User", " I moved to Oslo "], { speaker: "Assistant", text: "Noted.", importance: 0.2 }],
    { conversationId: "chat-9", start: 4, previous: "User: hi" });
  assert.deepEqual(turns.map((t) => t.content), ["User: I moved to Oslo", "Assistant: Noted."]);
  assert.deepEqual(turns.map((t) => t.context), ["User: hi", "User: I moved to Oslo"]);
  assert.deepEqual(turns.map((t) => t.sourceRef), ["chat-9#4", "chat-9#5"]);
  assert.ok(turns.every((t) => t.type === MemoryType.MEMORY_TYPE_EPISODIC));
  assert.equal(turns[1].importance, 0.2);
});

test("a recall keeps the server's block unless hits were dropped, then builds one", () => {
  const hit = (content: string, final: number) => ({
    memory: { ...memoryInput(content), memoryId: content, createdAtMs: Date.UTC(2026, 0, 2), type: MemoryType.MEMORY_TYPE_SEMANTIC },
    breakdown: { final },
  });
  const result = QueryResult.fromPartial({ hits: [hit("a", 0.9), hit("b", 0.1)], contextBlock: "SERVER BLOCK" });
  assert.equal(recallFrom(result, 0).context, "SERVER BLOCK");
  const strict = recallFrom(result, 0.5);
  assert.deepEqual(strict.memories.map((m) => m.content), ["a"]);
  assert.equal(strict.context, "Relevant memories (most relevant first):\n- [semantic, 2026-01-02] a");
  assert.equal(contextFromHits([]), "");
});

test("errors are typed by status code and keep the server's details", () => {
  const e = errorFromStatus({ code: Status.NOT_FOUND, details: "memory 'x' does not exist" }, "History");
  assert.ok(e instanceof NotFoundError && e instanceof EngramError && e instanceof Error);
  assert.equal(e.name, "NotFoundError");
  assert.equal(e.message, "History: NOT_FOUND: memory 'x' does not exist");
  assert.ok(errorFromStatus({ code: Status.INVALID_ARGUMENT }) instanceof InvalidArgumentError);
  assert.ok(errorFromStatus({ code: Status.UNAUTHENTICATED }) instanceof UnauthenticatedError);
  assert.ok(errorFromStatus({ code: Status.RESOURCE_EXHAUSTED }) instanceof ResourceExhaustedError);
  const other = errorFromStatus({ code: Status.DATA_LOSS, details: "d" });
  assert.equal(other.constructor, EngramError);
  assert.equal(other.codeName, "DATA_LOSS");
});

test("fromEnv reads ENGRAM_ADDRESS, ENGRAM_KEY and ENGRAM_TIMEOUT_S", () => {
  const c = EngramClient.fromEnv({}, { ENGRAM_ADDRESS: "127.0.0.1:1", ENGRAM_ADMIN_KEY: "adm", ENGRAM_TIMEOUT_S: "2.5" });
  assert.equal(c.address, "127.0.0.1:1");
  assert.equal(c.key, "adm");
  assert.equal(c.timeoutMs, 2500);
  assert.equal(c.withKey("other").key, "other");
  assert.equal(c.key, "adm");
  c.close();
  assert.throws(() => EngramClient.fromEnv({}, { ENGRAM_TIMEOUT_S: "soon" }), /not a number/);
  assert.throws(() => EngramClient.fromEnv({}, { ENGRAM_TIMEOUT_S: "0" }), RangeError);
});
