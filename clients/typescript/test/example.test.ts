// examples/agent.ts, compiled, run as a user would run it against the real server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { ADDRESS, adminClient, freshTenant } from "./server";

const run = promisify(execFile);

test("the example agent remembers a fact and answers from it on a later turn", async () => {
  const admin = adminClient();
  const tenant = freshTenant("agent");
  await admin.createTenant(tenant);
  const { secret } = await admin.createKey("agent", { tenantIds: [tenant] });
  const agent = join(__dirname, "..", "examples", "agent.js");
  const env = { ...process.env, ENGRAM_ADDRESS: ADDRESS, ENGRAM_KEY: secret };
  const first = await run(process.execPath, [agent, tenant, "remember: my favourite colour is teal"], { env });
  assert.match(first.stdout, /^Noted \(.+\)\.\n$/);
  const second = await run(process.execPath, [agent, tenant, "what is my favourite colour?"], { env });
  assert.equal(second.stdout, "From what I remember: my favourite colour is teal\n");
  const stored = [];
  for await (const m of admin.iterMemories(tenant)) stored.push(m.content);
  assert.deepEqual(stored.sort(), ["Assistant: From what I remember: my favourite colour is teal",
    "User: what is my favourite colour?", "my favourite colour is teal"]);
  const denied = await run(process.execPath, [agent, `${tenant}-other`, "hello there, what's up?"], { env })
    .catch((e: { code: number; stderr: string }) => e);
  assert.equal((denied as { code: number }).code, 1);
  assert.match((denied as { stderr: string }).stderr, /PERMISSION_DENIED/);
  await admin.deleteTenant(tenant);
  admin.close();
});
