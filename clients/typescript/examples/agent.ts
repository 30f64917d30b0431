// An agent loop on engram: before each answer it recalls what it knows about the user, after it remembers the
// exchange (and marks the memories it used), so the next turn, or the next session, can build on it.
//
//   ENGRAM_ADDRESS=127.0.0.1:50051 ENGRAM_KEY=<key for the tenant> node agent.js acme/alice
//   > remember: I am allergic to peanuts
//   > any snack ideas for my flight?
//
// Messages come from the command line after the tenant, or one per line on stdin. `answer` stands in for your
// model: give it `recalled.context` in the prompt.
import { createInterface } from "node:readline";
import { EngramClient, type Recall, turn } from "engram-grpc";

/** Your LLM call goes here; this stand-in answers from the most relevant memory. */
async function answer(message: string, recalled: Recall): Promise<string> {
  const prompt = `${recalled.context}\n\nUser: ${message}\nAssistant:`;   // what a model would be sent
  void prompt;
  const best = recalled.memories.find((m) => !m.content.startsWith("User:") && !m.content.startsWith("Assistant:"));
  return best ? `From what I remember: ${best.content}` : "I don't know that yet.";
}

async function handle(engram: EngramClient, tenant: string, message: string, n: number): Promise<string> {
  const fact = /^remember:\s*(.+)$/i.exec(message);
  if (fact) {   // an explicit fact: one semantic memory, kept for weeks rather than days
    const written = await engram.remember(tenant, fact[1], { type: "semantic", importance: 0.8, sourceRef: `cli#${n}` });
    return `Noted (${written.memoryId}).`;
  }
  const done = await turn(engram, tenant, message, (recalled) => answer(message, recalled), { sourceRef: `cli#${n}` });
  return done.answer;
}

async function main(): Promise<void> {
  const [tenant, ...messages] = process.argv.slice(2);
  if (!tenant) throw new Error("usage: node agent.js TENANT [MESSAGE ...]  (ENGRAM_ADDRESS, ENGRAM_KEY)");
  const engram = EngramClient.fromEnv();
  try {
    const lines = messages.length ? messages : createInterface({ input: process.stdin });
    let n = 0;
    for await (const message of lines) {
      if (!message.trim()) continue;
      process.stdout.write(`${await handle(engram, tenant, message.trim(), n++)}\n`);
    }
  } finally {
    engram.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`agent: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
