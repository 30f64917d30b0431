/**
 * The agent's read-write loop in one place: recall before answering → answer → remember after → touch what was
 * used. {@link turn} runs the whole loop in one call, given the user message and a function that answers it
 * from the recalled memories; {@link endTurn} is its second half on its own, for callers whose answer arrives
 * later than the recall. The same steps as the Python SDK's `engram_client.loop`.
 */
import type { EngramClient } from "./client";
import type { RecallOptions } from "./options";
import type { WriteResult } from "./gen/engram/v1/service";
import { conversationInputs, type MemoryInputLike, type MemoryLike, type Recall } from "./requests";

/** What the second half of a turn did: the write results (one per memory, in order), the ids it marked as
 * used, and those the server no longer had. */
export interface Remembered {
  written: WriteResult[];
  used: string[];
  missing: string[];
}

/** One whole turn: what was recalled, the answer, what was written and what was marked as used. */
export interface Turn extends Remembered {
  recall: Recall;
  answer: string;
}

/** Options of {@link endTurn}; the remaining MemoryInput fields apply to every memory that does not set them. */
export type EndTurnOptions = MemoryInputLike & {
  /** What to write (strings or MemoryInput-like objects); may be empty. */
  memories?: readonly MemoryLike[];
  /** Memory ids the answer used: each counts as one access; may be empty. */
  usedIds?: readonly string[];
};

/** Options of {@link turn}: recall options and these. */
export type TurnOptions = RecallOptions & {
  /** What to write after answering (default: the exchange, a `User:` and an `Assistant:` turn; `[]`: nothing). */
  remember?: MemoryLike | readonly MemoryLike[];
  /** The recalled ids the answer used (default: all of them). */
  used?: readonly string[];
  /** Stored with every memory written, e.g. `"chat-13#1"`. */
  sourceRef?: string;
};

/** After answering: writes `memories` (each gets `sourceRef` and the other MemoryInput fields it does not set
 * itself), then marks `usedIds` as used. */
export async function endTurn(client: EngramClient, tenantId: string, options: EndTurnOptions = {}): Promise<Remembered> {
  const { memories = [], usedIds = [], ...common } = options;
  const written = memories.length ? (await client.write(tenantId, memories, { common })).results : [];
  const ids = [...new Set(usedIds.filter((id) => id))];
  const missing = ids.length ? (await client.touch(tenantId, ids)).missing : [];
  return { written, used: ids.filter((id) => !missing.includes(id)), missing };
}

/**
 * The whole loop in one call. `answer` is the reply text, or a function (sync or async) that makes it from the
 * recall (put its `context` into the prompt).
 */
export async function turn(client: EngramClient, tenantId: string, userMessage: string,
  answer: string | ((recalled: Recall) => string | Promise<string>), options: TurnOptions = {}): Promise<Turn> {
  const { remember, used, sourceRef = "", ...recallOptions } = options;
  const recalled = await client.recall(tenantId, userMessage, recallOptions);
  const text = typeof answer === "string" ? answer : await answer(recalled);
  const memories = remember === undefined
    ? conversationInputs([["User", userMessage], ["Assistant", text]])
    : Array.isArray(remember) ? remember : [remember as MemoryLike];
  const done = await endTurn(client, tenantId, {
    memories, usedIds: used ?? recalled.hits.flatMap((h) => (h.memory ? [h.memory.memoryId] : [])), sourceRef,
  });
  return { recall: recalled, answer: text, ...done };
}
