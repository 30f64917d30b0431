// The real engram server the tests talk to: tests/e2e/test_node_client.py starts one with small real models and
// passes its address and admin key in ENGRAM_TEST_ADDRESS and ENGRAM_TEST_ADMIN_KEY.
import { randomBytes } from "node:crypto";
import { EngramClient } from "engram-grpc";

export const ADDRESS = process.env.ENGRAM_TEST_ADDRESS ?? "";
export const ADMIN_KEY = process.env.ENGRAM_TEST_ADMIN_KEY ?? "";
if (!ADDRESS || !ADMIN_KEY) {
  throw new Error("ENGRAM_TEST_ADDRESS and ENGRAM_TEST_ADMIN_KEY must name a running engram server and its admin key "
    + "(tests/e2e/test_node_client.py starts one and sets them)");
}

/** An admin client of the test server. */
export function adminClient(address = ADDRESS): EngramClient {
  return new EngramClient(address, { key: ADMIN_KEY, timeoutMs: 60_000 });
}

/** A tenant id no other test uses. */
export function freshTenant(prefix: string): string {
  return `ts/${prefix}-${randomBytes(4).toString("hex")}`;
}
