// Retries through a fault-injecting proxy in front of the real server: which failures are retried, that a
// retried write carries the same idempotency key (so an attempt the server applied is not applied twice), and
// that deadlines bound attempts and calls.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CancelledError, DeadlineExceededError, EngramClient, InvalidArgumentError, RetryPolicy, type RpcName, Status,
  UnavailableError, WriteOutcome,
} from "engram-grpc";
import { type Proxy, type Step, startProxy } from "./proxy";
import { ADDRESS, ADMIN_KEY, adminClient, freshTenant } from "./server";

const FAST = new RetryPolicy({ initialBackoffMs: 1, maxBackoffMs: 5 });

describe("retries", () => {
  const admin = adminClient();
  let tenant: string;
  let proxy: Proxy;
  let plan: (method: RpcName, attempt: number) => Step = () => "forward";
  let client: EngramClient;

  before(async () => {
    tenant = freshTenant("retry");
    await admin.createTenant(tenant);
    proxy = await startProxy(ADDRESS, (method, attempt) => plan(method, attempt));
    client = new EngramClient(proxy.address, { key: ADMIN_KEY, retry: FAST, timeoutMs: 30_000 });
  });
  after(async () => {
    client.close();
    await proxy.close();
    await admin.deleteTenant(tenant);
    admin.close();
  });

  function attemptsOf(method: RpcName): typeof proxy.seen {
    return proxy.seen.filter((s) => s.method === method);
  }

  test("a write whose answer was lost is retried with the same idempotency key: one memory", async () => {
    proxy.reset();
    plan = (method, attempt) => (method === "write" && attempt === 1
      ? { fail: Status.UNAVAILABLE, afterForwarding: true } : "forward");
    const request = { tenantId: tenant, memories: [{ content: "The user's dog is called Pepper" }] };
    const reply = await client.write(request.tenantId, request.memories);
    const writes = attemptsOf("write");
    assert.equal(writes.length, 2);
    const keys = writes.map((w) => w.request.idempotencyKey);
    assert.match(String(keys[0]), /^[0-9a-f]{32}$/);
    assert.equal(keys[1], keys[0]);
    assert.equal(writes[1].metadata["x-request-id"], writes[0].metadata["x-request-id"]);
    assert.equal(writes[0].metadata.authorization, `Bearer ${ADMIN_KEY}`);
    const stored = (await admin.listPage(tenant)).memories.filter((m) => m.content.includes("Pepper"));
    assert.equal(stored.length, 1);
    assert.equal(reply.results[0].memoryId, stored[0].memoryId);
    assert.equal(reply.results[0].outcome, WriteOutcome.WRITE_OUTCOME_CREATED);   // not a near-duplicate's MERGED
  });

  test("each call gets a fresh key; the caller's request is not changed", async () => {
    proxy.reset();
    plan = () => "forward";
    const request = { tenantId: tenant, memoryIds: ["no-such-id"], idempotencyKey: "" };
    await client.call("delete", request);
    await client.call("delete", request);
    assert.equal(request.idempotencyKey, "");
    const keys = attemptsOf("delete").map((d) => d.request.idempotencyKey);
    assert.equal(keys.length, 2);
    assert.notEqual(keys[0], keys[1]);
  });

  test("a keyed call is retried on DEADLINE_EXCEEDED, an unkeyed one only on UNAVAILABLE", async () => {
    proxy.reset();
    plan = (method, attempt) => (method === "delete" && attempt === 1 ? { fail: Status.DEADLINE_EXCEEDED }
      : method === "touch" ? { fail: Status.DEADLINE_EXCEEDED } : "forward");
    assert.equal((await client.delete(tenant, ["no-such-id"])).deleted, 0);
    assert.equal(attemptsOf("delete").length, 2);
    await assert.rejects(client.touch(tenant, ["no-such-id"]), DeadlineExceededError);
    assert.equal(attemptsOf("touch").length, 1);

    proxy.reset();
    plan = (method, attempt) => (method === "touch" && attempt <= 2 ? { fail: Status.UNAVAILABLE } : "forward");
    assert.deepEqual((await client.touch(tenant, ["no-such-id"])).missing, ["no-such-id"]);
    assert.ok(attemptsOf("touch").length >= 3);
  });

  test("reads give up after maxAttempts; other codes are never retried", async () => {
    proxy.reset();
    plan = (method) => (method === "search" ? { fail: Status.UNAVAILABLE } : method === "get" ? { fail: Status.INVALID_ARGUMENT } : "forward");
    const error = await client.search(tenant, "dog").catch((e: unknown) => e);
    assert.ok(error instanceof UnavailableError, String(error));
    assert.equal(attemptsOf("search").length, FAST.maxAttempts);
    await assert.rejects(client.get(tenant, ["x"]), InvalidArgumentError);
    assert.equal(attemptsOf("get").length, 1);
    const once = new EngramClient(proxy.address, { key: ADMIN_KEY, retry: new RetryPolicy({ maxAttempts: 1 }) });
    await assert.rejects(once.search(tenant, "dog"), UnavailableError);
    assert.equal(attemptsOf("search").length, FAST.maxAttempts + 1);
    once.close();
  });

  test("deadlines: a hung attempt ends at attemptTimeoutMs and is retried; timeoutMs bounds the call", async () => {
    proxy.reset();
    plan = (method, attempt) => (method === "search" && attempt === 1 ? "hang" : "forward");
    const perAttempt = new RetryPolicy({ initialBackoffMs: 1, attemptTimeoutMs: 300 });
    const started = performance.now();
    const result = await client.search(tenant, "dog", { retry: perAttempt, timeoutMs: 20_000 });
    assert.equal(result.hits[0].memory?.content, "The user's dog is called Pepper");
    assert.ok(performance.now() - started < 10_000);
    assert.equal(attemptsOf("search").length, 2);

    plan = (method) => (method === "search" ? "hang" : "forward");
    const t0 = performance.now();
    await assert.rejects(client.search(tenant, "dog", { timeoutMs: 400 }), DeadlineExceededError);
    const took = performance.now() - t0;
    assert.ok(took >= 350 && took < 3000, `took ${took} ms`);
  });

  test("an AbortSignal cancels the call", async () => {
    plan = (method) => (method === "search" ? "hang" : "forward");
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(client.search(tenant, "dog", { signal: controller.signal }), CancelledError);
  });
});
