// The client against a real engram server (see server.ts): every call of the core API and its typed errors.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  AuditOp, EngramClient, InvalidArgumentError, MemoryStatus, MemoryType, NotFoundError, PermissionDeniedError, Status,
  turn, UnauthenticatedError, WriteOutcome,
} from "engram-grpc";
import { ADDRESS, adminClient, freshTenant } from "./server";

const FACTS = [
  { content: "The user is allergic to peanuts", type: "semantic", importance: 0.9 },
  { content: "The user flew to Tokyo on Monday", type: "episodic", entities: ["tokyo"] },
  { content: "To reset the router, hold the button for ten seconds", type: "procedural" },
] as const;

describe("engram over gRPC", () => {
  const admin = adminClient();
  let tenant: string;
  let engram: EngramClient;   // a key scoped to the tenant, as an application would hold

  before(async () => {
    tenant = freshTenant("core");
    await admin.createTenant(tenant);
    const { secret } = await admin.createKey("ts-core", { tenantIds: [tenant] });
    engram = admin.withKey(secret);
  });
  after(() => admin.close());

  test("write (batch) then search returns the ranking breakdown, timings and a context block", async () => {
    const written = await engram.write(tenant, FACTS.map((f) => ({ ...f, entities: [...("entities" in f ? f.entities : [])] })),
      { common: { sourceRef: "chat-1#0" } });
    assert.deepEqual(written.results.map((r) => r.outcome), [WriteOutcome.WRITE_OUTCOME_CREATED, WriteOutcome.WRITE_OUTCOME_CREATED,
      WriteOutcome.WRITE_OUTCOME_CREATED]);
    assert.equal(new Set(written.results.map((r) => r.memoryId)).size, 3);

    const result = await engram.search(tenant, "what food allergy does the user have", { topK: 2, contextBlock: true });
    assert.equal(result.hits.length, 2);
    const top = result.hits[0];
    assert.equal(top.memory?.content, "The user is allergic to peanuts");
    assert.equal(top.memory?.type, MemoryType.MEMORY_TYPE_SEMANTIC);
    assert.equal(top.memory?.sourceRef, "chat-1#0");
    assert.ok(Math.abs((top.memory?.importance ?? 0) - 0.9) < 1e-6);
    const b = top.breakdown!;
    assert.equal(b.denseRank, 1);
    assert.ok(b.final > 0 && b.relevance > 0 && b.rrf > 0, JSON.stringify(b));
    assert.ok(b.final >= result.hits[1].breakdown!.final);
    assert.ok((result.timings?.totalNs ?? 0) > 0 && (result.timings?.embedNs ?? 0) > 0);
    assert.match(result.contextBlock, /allergic to peanuts/);

    const [one, two] = await engram.searchMany(tenant, ["router reset", { text: "Tokyo trip", topK: 1 }], { topK: 3 });
    assert.equal(one.hits[0].memory?.content, FACTS[2].content);
    assert.equal(two.hits.length, 1);
    assert.equal(two.hits[0].memory?.content, FACTS[1].content);
  });

  test("recall before answering, remember after: the remembered fact is recalled next", async () => {
    const remembered = await engram.remember(tenant, "The user's sister Maria lives in Lisbon",
      { type: "semantic", entities: ["maria", "lisbon"] });
    assert.equal(remembered.outcome, WriteOutcome.WRITE_OUTCOME_CREATED);
    const recalled = await engram.recall(tenant, "Where does Maria live?", { topK: 3 });
    assert.equal(recalled.skipped, "");
    assert.equal(recalled.memories[0].memoryId, remembered.memoryId);
    assert.match(recalled.context, /Maria lives in Lisbon/);
    const strict = await engram.recall(tenant, "Where does Maria live?", { topK: 3, minScore: 2 });
    assert.equal(strict.hits.length, 0);
    assert.equal(strict.context, "");
    const smallTalk = await engram.recall(tenant, "thanks!");
    assert.equal(smallTalk.hits.length, 0);
    assert.notEqual(smallTalk.skipped, "");
    const plain = await engram.remember(tenant, "The user had ramen for lunch today", { type: undefined });
    const [stored] = (await engram.get(tenant, [plain.memoryId])).memories;
    assert.equal(stored.type, MemoryType.MEMORY_TYPE_EPISODIC);   // remember's default type, as the Python SDK's
  });

  test("turn runs recall → answer → remember → touch", async () => {
    const done = await turn(engram, tenant, "Any snack ideas for the user's flight?", async (recalled) => {
      assert.match(recalled.context, /peanuts/);
      return "Pretzels: nothing with peanuts.";
    }, { sourceRef: "chat-2#0" });
    assert.equal(done.written.length, 2);
    assert.ok(done.used.length > 0);
    assert.deepEqual(done.missing, []);
    const stored = await engram.get(tenant, done.written.map((w) => w.memoryId));
    assert.deepEqual(stored.memories.map((m) => m.content),
      ["User: Any snack ideas for the user's flight?", "Assistant: Pretzels: nothing with peanuts."]);
    assert.equal(stored.memories[1].context, "User: Any snack ideas for the user's flight?");
    assert.ok(stored.memories.every((m) => m.sourceRef === "chat-2#0"));
    const used = await engram.get(tenant, done.used);
    assert.ok(used.memories.every((m) => m.accessCount >= 1));
  });

  test("get, list, history, confirm, delete and forget", async () => {
    const t = freshTenant("life");
    await admin.createTenant(t);
    const [budget] = (await admin.write(t, [{ content: "The budget is 5k", key: "budget" }])).results;
    const [raised] = (await admin.write(t, [{ content: "The budget is 8k", key: "budget" }])).results;
    assert.deepEqual(raised.superseded, [budget.memoryId]);
    const chain = await admin.history(t, budget.memoryId);
    assert.deepEqual(chain.versions.map((m) => m.content), ["The budget is 5k", "The budget is 8k"]);
    assert.equal(chain.latestId, raised.memoryId);

    const [unsure] = (await admin.write(t, [{ content: "The user might be moving to Berlin", confidence: 0.2 }])).results;
    assert.equal(unsure.outcome, WriteOutcome.WRITE_OUTCOME_PENDING);
    const confirmed = await admin.confirm(t, [unsure.memoryId]);
    assert.equal(confirmed.results[0].memory?.status, MemoryStatus.MEMORY_STATUS_ACTIVE);

    const got = await admin.get(t, [raised.memoryId, "no-such-id"]);
    assert.deepEqual(got.memories.map((m) => m.memoryId), [raised.memoryId]);
    assert.deepEqual(got.missing, ["no-such-id"]);

    const page = await admin.listPage(t, { pageSize: 2 });
    assert.equal(page.memories.length, 2);
    assert.notEqual(page.nextPageToken, "");
    const all = [];
    for await (const m of admin.iterMemories(t, { pageSize: 2 })) all.push(m);
    assert.equal(all.length, 3);
    const active = [];
    for await (const m of admin.iterMemories(t, { filter: { statuses: ["active"] } })) active.push(m.memoryId);
    assert.deepEqual(active.sort(), [raised.memoryId, unsure.memoryId].sort());

    const deleted = await admin.delete(t, [unsure.memoryId, "no-such-id"]);
    assert.equal(deleted.deleted, 1);
    assert.deepEqual(deleted.missing, ["no-such-id"]);
    const dry = await admin.forget(t, { all: true, dryRun: true });
    assert.equal(dry.count, 1);
    const forgotten = await admin.forget(t, { all: true });
    assert.deepEqual(forgotten.memoryIds, [raised.memoryId]);
    const [archived] = (await admin.get(t, [raised.memoryId])).memories;
    assert.equal(archived.status, MemoryStatus.MEMORY_STATUS_ARCHIVED);
    assert.equal((await admin.search(t, "budget")).hits.length, 0);
    const purged = await admin.forget(t, { all: true, delete: true });
    assert.equal(purged.count, 2);
    assert.equal((await admin.listPage(t)).memories.length, 0);
    const confirms = [];
    for await (const entry of admin.iterAudit(t, { ops: ["confirm", "write"], pageSize: 1 })) confirms.push(entry);
    assert.deepEqual(confirms.map((e) => e.op), [AuditOp.AUDIT_OP_WRITE, AuditOp.AUDIT_OP_WRITE, AuditOp.AUDIT_OP_WRITE,
      AuditOp.AUDIT_OP_CONFIRM]);
    assert.equal(confirms[3].refs[0].memoryId, unsure.memoryId);
    await admin.deleteTenant(t);
  });

  test("the same idempotency key twice stores one memory and answers with the first answer", async () => {
    const t = freshTenant("idem");
    await admin.createTenant(t);
    const key = "ts-idem-0001";
    const first = await admin.write(t, ["The user's cat is called Miso"], { idempotencyKey: key });
    const again = await admin.write(t, ["The user's cat is called Miso"], { idempotencyKey: key });
    assert.equal(again.results[0].memoryId, first.results[0].memoryId);
    assert.equal(again.results[0].outcome, WriteOutcome.WRITE_OUTCOME_CREATED);
    assert.equal((await admin.listPage(t)).memories.length, 1);
    await assert.rejects(admin.write(t, ["Another request"], { idempotencyKey: key }), InvalidArgumentError);
    await admin.deleteTenant(t);
  });

  test("bad input rejects with InvalidArgumentError and changes nothing", async () => {
    const t = freshTenant("bad");
    await admin.createTenant(t);
    const error = await admin.write(t, [{ content: "x", importance: 2 }]).catch((e: unknown) => e);
    assert.ok(error instanceof InvalidArgumentError, String(error));
    assert.equal(error.code, Status.INVALID_ARGUMENT);
    assert.equal(error.codeName, "INVALID_ARGUMENT");
    assert.equal(error.method, "Write");
    assert.ok(error.details.length > 0);
    await assert.rejects(admin.write(t, [""]), InvalidArgumentError);
    await assert.rejects(admin.search(t, "x", { topK: 1_000_000 }), InvalidArgumentError);
    assert.equal((await admin.listPage(t)).memories.length, 0);
    await admin.deleteTenant(t);
  });

  test("unknown memories and tenants reject with NotFoundError", async () => {
    await assert.rejects(admin.history(tenant, "no-such-memory"), (e: unknown) => e instanceof NotFoundError
      && e.code === Status.NOT_FOUND && e.method === "History");
    await assert.rejects(admin.search(freshTenant("missing"), "anything"), NotFoundError);
  });

  test("a wrong key is Unauthenticated, a key for another tenant PermissionDenied, no retries", async () => {
    const wrong = new EngramClient(ADDRESS, { key: "not-a-key" });
    const started = performance.now();
    await assert.rejects(wrong.search(tenant, "x"), (e: unknown) => e instanceof UnauthenticatedError
      && e.code === Status.UNAUTHENTICATED);
    await assert.rejects(new EngramClient(ADDRESS).search(tenant, "x"), UnauthenticatedError);
    assert.ok(performance.now() - started < 5000);
    wrong.close();
    await assert.rejects(engram.search(`${tenant}-other`, "x"), PermissionDeniedError);
    await assert.rejects(engram.createTenant(freshTenant("nope")), PermissionDeniedError);
  });

  test("info reports the server's models and limits", async () => {
    const info = await engram.info();
    assert.ok(info.version.length > 0);
    assert.ok((info.embedder?.dim ?? 0) > 0);
    assert.ok((info.limits?.maxTopK ?? 0) > 0);
  });
});
