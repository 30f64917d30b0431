// A small engram client in Node.js: @grpc/grpc-js + @grpc/proto-loader, reading only ../../../proto.
// Usage: node client.js ADDRESS ADMIN_KEY TENANT
// Creates TENANT and a key scoped to it, writes three memories with that key, searches, checks that the
// key is refused for another tenant, and prints one JSON object with what it saw.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', '..', 'proto');
const definition = protoLoader.loadSync('engram/v1/service.proto', {
  includeDirs: [PROTO_ROOT], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
});
const v1 = grpc.loadPackageDefinition(definition).engram.v1;

function call(client, method, request, key) {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${key}`);
  const deadline = new Date(Date.now() + 30000);
  return new Promise((resolve, reject) => {
    client[method](request, metadata, { deadline }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

async function main() {
  const [address, adminKey, tenant] = process.argv.slice(2);
  if (!address || !adminKey || !tenant) throw new Error('usage: node client.js ADDRESS ADMIN_KEY TENANT');
  const credentials = grpc.credentials.createInsecure();
  const admin = new v1.AdminService(address, credentials);
  const memory = new v1.MemoryService(address, credentials);

  await call(admin, 'CreateTenant', { tenant_id: tenant }, adminKey);
  const { secret } = await call(admin, 'CreateKey', { name: 'node', tenant_ids: [tenant] }, adminKey);
  const written = await call(memory, 'Write', {
    tenant_id: tenant,
    memories: [
      { content: 'The user is allergic to peanuts', type: 'MEMORY_TYPE_SEMANTIC', importance: 0.9 },
      { content: 'The user flew to Tokyo on Monday', type: 'MEMORY_TYPE_EPISODIC', entities: ['tokyo'] },
      { content: 'To reset the router, hold the button for ten seconds', type: 'MEMORY_TYPE_PROCEDURAL' },
    ],
  }, secret);
  const searched = await call(memory, 'Search', {
    tenant_id: tenant, queries: [{ text: 'what food allergy does the user have', top_k: 2 }],
  }, secret);
  let denied = 'OK';
  try {
    await call(memory, 'Search', { tenant_id: `${tenant}-other`, queries: [{ text: 'x' }] }, secret);
  } catch (err) {
    denied = grpc.status[err.code];
  }
  const result = searched.results[0];
  process.stdout.write(JSON.stringify({
    outcomes: written.results.map((r) => r.outcome),
    hits: result.hits.map((h) => ({
      content: h.memory.content, type: h.memory.type, final: h.breakdown.final,
      dense_rank: h.breakdown.dense_rank, bm25_rank: h.breakdown.bm25_rank,
    })),
    total_ns: result.timings.total_ns,
    other_tenant: denied,
  }) + '\n');
  admin.close();
  memory.close();
}

main().catch((err) => {
  process.stderr.write(`engram node client: ${err.code !== undefined ? grpc.status[err.code] + ': ' : ''}${err.details || err.message}\n`);
  process.exit(1);
});
