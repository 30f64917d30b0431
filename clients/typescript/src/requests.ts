/**
 * Request builders: plain objects in (strings for enums, partial messages), complete generated messages out.
 * The same shapes as the Python SDK's (`memory_input`, `memory_filter`, `search_query`, `conversation_inputs`).
 */
import {
  Filter, type Hit, MemoryInput, MemoryStatus, MemoryType, type Memory, type QueryResult, Scoring, SearchQuery,
  type Timings,
} from "./gen/engram/v1/messages";
import { AuditOp } from "./gen/engram/v1/service";

/** A memory type as `"episodic"`, `"EPISODIC"`, `"MEMORY_TYPE_EPISODIC"` or the enum value. */
export type MemoryTypeLike = MemoryType | "episodic" | "semantic" | "procedural" | (string & {});
/** A memory status as `"active"`, `"PENDING"`, `"MEMORY_STATUS_ARCHIVED"` or the enum value. */
export type MemoryStatusLike = MemoryStatus | "active" | "pending" | "superseded" | "expired" | "archived"
  | "consolidated" | (string & {});

/** A memory to write, as a plain object: MemoryInput's fields (camelCase), `type` may be a name. */
export type MemoryInputLike = Partial<Omit<MemoryInput, "type">> & { type?: MemoryTypeLike };
/** A memory to write: its content alone, or a {@link MemoryInputLike}. */
export type MemoryLike = string | MemoryInputLike;
/** Which memories a search, list or forget considers: Filter's fields, `types` and `statuses` may be names. */
export type FilterLike = Partial<Omit<Filter, "types" | "statuses">> & {
  types?: MemoryTypeLike[];
  statuses?: MemoryStatusLike[];
};

/** SearchQuery's options besides the text: `topK`, `rerankDepth`, `contextBlock`, `scoring`, `filter`, ... */
export type SearchOptions = Partial<Omit<SearchQuery, "text" | "filter" | "scoring">> & {
  filter?: FilterLike;
  scoring?: Partial<Scoring>;
};

const PREFIX = { MemoryType: "MEMORY_TYPE_", MemoryStatus: "MEMORY_STATUS_", AuditOp: "AUDIT_OP_" } as const;
const ENUMS = { MemoryType, MemoryStatus, AuditOp } as const;

/** `"episodic"`, `"EPISODIC"` or `"MEMORY_TYPE_EPISODIC"` → its number (numbers pass through); an unknown name
 * throws a `RangeError` naming the choices. */
export function enumValue(enumName: keyof typeof ENUMS, value: string | number): number {
  if (typeof value === "number") return value;
  const prefix = PREFIX[enumName];
  const values = ENUMS[enumName] as unknown as Record<string, number>;
  let name = value.trim().toUpperCase();
  if (!name.startsWith(prefix)) name = prefix + name;
  const found = values[name];
  if (typeof found !== "number" || found <= 0) {
    const choices = Object.keys(values)
      .filter((k) => typeof values[k] === "number" && values[k] > 0)
      .map((k) => k.slice(prefix.length).toLowerCase());
    throw new RangeError(`unknown ${enumName} ${JSON.stringify(value)}; one of: ${choices.join(", ")}`);
  }
  return found;
}

/** A complete MemoryInput from a string (content only) or a {@link MemoryInputLike}. */
export function memoryInput(value: MemoryLike): MemoryInput {
  if (typeof value === "string") return MemoryInput.fromPartial({ content: value });
  const { type, ...rest } = value;
  return MemoryInput.fromPartial({ ...rest, type: type === undefined ? undefined : enumValue("MemoryType", type) });
}

/**
 * `common` under `item`, as protobuf's MergeFrom does it (what the Python SDK does): the item's set fields win,
 * lists are joined (common's first), metadata maps merged.
 */
export function mergeInput(common: MemoryInput, item: MemoryInput): MemoryInput {
  const merged: Record<string, unknown> = { ...common };
  for (const [name, value] of Object.entries(item)) {
    const base = merged[name];
    if (Array.isArray(value)) merged[name] = [...(base as unknown[]), ...value];
    else if (name === "metadata") merged[name] = { ...(base as object), ...(value as object) };
    else if (value !== undefined && value !== "" && value !== 0 && value !== false) merged[name] = value;
  }
  return merged as unknown as MemoryInput;
}

/** The memories of a WriteRequest: each one with the `common` fields it does not set itself. */
export function writeInputs(memories: Iterable<MemoryLike>, common?: MemoryInputLike): MemoryInput[] {
  const base = common === undefined ? undefined : memoryInput(common);
  return Array.from(memories, (m) => (base ? mergeInput(base, memoryInput(m)) : memoryInput(m)));
}

/** A complete Filter from a {@link FilterLike} (undefined: no filter). */
export function memoryFilter(value?: FilterLike): Filter {
  if (value === undefined) return Filter.fromPartial({});
  const { types, statuses, ...rest } = value;
  return Filter.fromPartial({
    ...rest,
    types: types?.map((t) => enumValue("MemoryType", t)),
    statuses: statuses?.map((s) => enumValue("MemoryStatus", s)),
  });
}

/** A complete SearchQuery: the text and {@link SearchOptions}. */
export function searchQuery(text: string, options: SearchOptions = {}): SearchQuery {
  const { filter, scoring, ...rest } = options;
  return SearchQuery.fromPartial({
    ...rest,
    text,
    filter: memoryFilter(filter),
    scoring: scoring === undefined ? undefined : Scoring.fromPartial(scoring),
  });
}

/** One turn of a conversation: `[speaker, text]`, or an object with `speaker`, `text` and MemoryInput fields
 * (`createdAtMs`, `sourceRef`, `entities`, `importance`, ...). */
export type ConversationTurn = readonly [string, string] | (MemoryInputLike & { speaker?: string; text: string });

/** Options of {@link conversationInputs}; the remaining fields apply to every turn. */
export type ConversationOptions = MemoryInputLike & {
  /** Names the conversation: each turn's `sourceRef` defaults to `"<conversationId>#<n>"`. */
  conversationId?: string;
  /** The number of the first turn given (default 0). */
  start?: number;
  /** The turn before the first one given (when a conversation is written in several calls). */
  previous?: string;
};

/**
 * One EPISODIC memory per turn, `"<speaker>: <text>"`, with the previous turn as its `context` (indexed with it,
 * never returned as its content).
 */
export function conversationInputs(turns: Iterable<ConversationTurn>, options: ConversationOptions = {}): MemoryInput[] {
  const { conversationId = "", start = 0, previous: first = "", ...common } = options;
  const out: MemoryInput[] = [];
  let previous = first;
  let n = start;
  for (const turn of turns) {
    const { speaker = "", text = "", ...fields } = isPair(turn) ? { speaker: turn[0], text: turn[1] } : turn;
    const who = String(speaker).trim();
    const said = who ? `${who}: ${String(text).trim()}` : String(text).trim();
    const sourceRef = conversationId && !("sourceRef" in fields) ? { sourceRef: `${conversationId}#${n}` } : {};
    out.push(memoryInput({ type: "episodic", ...common, ...fields, ...sourceRef, content: said, context: previous }));
    previous = said;
    n += 1;
  }
  return out;
}

function isPair(turn: ConversationTurn): turn is readonly [string, string] {
  return Array.isArray(turn);
}

/** What an agent reads before answering: the ranked hits and a prompt-ready context block. */
export class Recall {
  constructor(
    /** The hits, best first (each with its memory and score breakdown). */
    readonly hits: Hit[],
    /** A prompt-ready block of the hits ("" when there are none). */
    readonly context: string,
    /** The server's per-stage timings of the search. */
    readonly timings: Timings | undefined,
    /** The recall gate found the text needs no memory (e.g. "small talk"): why; no search ran. "" otherwise. */
    readonly skipped: string = "",
  ) {}

  /** The hits' memories, best first. */
  get memories(): Memory[] {
    return this.hits.flatMap((h) => (h.memory ? [h.memory] : []));
  }
}

/** A {@link Recall} from a search result: hits below `minScore` (their final score) are dropped, and the server's
 * context block kept only when none was. */
export function recallFrom(result: QueryResult, minScore: number): Recall {
  const hits = result.hits.filter((h) => (h.breakdown?.final ?? 0) >= minScore);
  const context = hits.length === result.hits.length ? result.contextBlock : "";
  return new Recall(hits, context || contextFromHits(hits), result.timings, result.skipped);
}

/** A prompt-ready block, for servers that send none: one line per memory, best first. */
export function contextFromHits(hits: readonly Hit[]): string {
  if (hits.length === 0) return "";
  const lines = ["Relevant memories (most relevant first):"];
  for (const h of hits) {
    const m = h.memory;
    if (!m) continue;
    const kind = (MemoryType[m.type] ?? "UNRECOGNIZED").replace(/^MEMORY_TYPE_/, "").toLowerCase();
    const when = m.createdAtMs ? new Date(m.createdAtMs).toISOString().slice(0, 10) : "?";
    lines.push(`- [${kind}, ${when}] ${m.content}`);
  }
  return lines.join("\n");
}
