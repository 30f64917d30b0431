"""Evidence deep in a long turn: LoCoMo conversations with every evidence turn (and a third of the others) wrapped
inside a 1–2 KB assistant-style turn, the original line placed after about 1 KB of filler.

    .venv/bin/python -m benchmarks.quality.long_turns [--split dev|held_out] [--first-tokens] [--where] [--out PATH]
                                                      [--windows W/L,...] [--quick] [--filler B,A1,A2]

Built at run time from ../shared/data (nothing of LoCoMo is written into the repository); the filler sentences are
written for this project. ``--split dev`` (the default): the dev conversations (benchmarks/quality/block.py
LOCOMO_DEV); ``held_out``: the others, the same construction, never tuned on. One in-process server at its defaults
ingests them once (long turns get passage vectors: server/index/memory_vectors.py); each question is searched top
10 and as the SDK's recall (the context block) with the dense side reading every vector of a memory (the default)
and, in the same run on the same index, its main vector alone (``--main-only``: ``tiered.SEARCH_PASSAGES`` off in
process, the first ``embed_max_length`` tokens, as before passage vectors); and with BM25 reading each memory's own document
alone, not its windows (``lucene.SEARCH_WINDOWS`` off in process: server/lexical/windows.py). ``--first-tokens``
adds the cross-encoder reading each long memory's first tokens instead of its best passage
(server/engine/passages.py; ``PASSAGE_CHARS`` raised past every memory's length); ``--ce-windows 400,600`` the
cross-encoder reading a window of that many characters of a long turn (``passages.TURN_WINDOW``, 400 by default);
``--ce-reads 1,3,8n`` the cross-encoder reading that many windows of a long turn, the best logit kept
(``passages.TURN_READS``, 1: the one window ``best_window`` picks; ``n``: each without the memory's
context, ``passages.TURN_READ_CONTEXT`` off; a windows variant reads windows, the sentence reads off);
``--ce-sentences 3,5n,2fn`` the cross-encoder reading that many sentence units of a long turn
(``passages.TURN_SENTENCES``, 3 by default, without the context; ``-1``: every unit; ``n``: without the memory's
context, else with it; ``f``: the unit at the closest passage vector first; ``a``: the units after the first apart from
those taken, ``passages.UNITS_APART``; ``s``: each unit with the turn's speaker label, ``passages.UNIT_SPEAKER``);
``--every-word`` the window chosen
by every query word, function words too (``passages.SKIP_FUNCTION_WORDS`` off, the rule before); ``--dense-focus``
the window where the turn's passage vector closest to the question lies (``passages.DENSE_FOCUS`` on);
``--no-speaker-list`` without the named speaker's own dense list (``speakers.SPEAKER_LIST`` off);
``--rerankers PATH,…`` another cross-encoder folder (``models.reranker``) in the server's place, each a variant at
the defaults on the same index (``EvalServer.reranker_swapped``); ``--no-query-adapter`` without the query adapter
(the dense side searching with the query's own vector: server/engine/query_adapter.py). ``--filler-from-turns``
draws the filler from the conversation's own turns that are no question's evidence instead of the generic FILLER
sentences.
``--windows 48/16,128/8`` ingests the set again for each width/limit pair (tokens of a chat turn's dense passage
window, ``advanced.turn_passage_tokens``; passage vectors a turn gets at most, ``advanced.turn_passage_vectors``;
every memory here is a chat turn, EPISODIC), set on the running server's write stage between ingests, and searches
each index at the defaults; ``0/L`` is the rule before chat turns had their own windows (the model's window, texts
cut at it, ``advanced.passage_vectors`` L); ``--quick`` searches the first index at the defaults alone. ``--filler 500,100,400`` sets the filler
before the said line and the range after it (characters; default 1000,300,800: 1–2 KB turns; 500,100,400: ~1 KB
turns). ``--long-share 1`` wraps every turn (a third of those without evidence by default). Block searches are
timed with the tenant's cached cross-encoder scores dropped first. ``--where`` adds, for the default
and the BM25-without-windows variants, where each evidence turn ranks in the dense, BM25 and fused lists (top 100,
no rerank) and at the defaults (top 50). ``--depths 6,11,0`` runs every variant at each cross-encoder depth (0: the
server's default); ``--one-client`` keeps the latency-target controller on and sends every search alone, so each
variant reads at the depth this machine gives one client (reported as ``mean_depth_used``). The background
consolidation is off (its first tick would change the index under later variants); ``--consolidate`` runs it once on
each tenant after writing, ``--consolidate-any-length`` with its members' length limit lifted (the rule before).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.quality.block import LOCOMO_DEV, RERANKER_VARIANT, block_recall
from benchmarks.quality.datasets import Query, evaluate, load_locomo, repo_root
from benchmarks.quality.harness import BM25, DEFAULTS, DENSE, HYBRID, EvalServer, Ingested, Stage
from engram_proto.v1 import messages_pb2 as pb

log = logging.getLogger(__name__)

FILLER = (
    "Here is a short overview before getting to the details.",
    "There are a few things worth keeping in mind when planning something like this.",
    "Many people find it helpful to write down a simple list first and then sort it by priority.",
    "It also helps to set aside a fixed time each week, so the routine does not depend on motivation.",
    "If anything feels overwhelming, breaking it into smaller steps usually makes it easier to start.",
    "Budgets tend to run over, so leaving a margin of ten to twenty percent is a sensible default.",
    "Checking the weather and the opening hours the day before saves a lot of trouble.",
    "Friends and family are often glad to help if you ask them early and clearly.",
    "Keeping notes of what worked and what did not makes the next attempt much smoother.",
    "In the end, the best plan is the one you can actually follow without strain.",
    "Let me know if you would like a more detailed checklist or a printable version.",
    "A good night's sleep and regular meals make every other part of the plan work better.",
)


FILLER_CHARS = (1000, 300, 800)   # filler before the said line; the range of filler after it


def filler(chars: int, rng: random.Random, pool: Sequence[str] = FILLER) -> str:
    """At least ``chars`` characters of ``pool``'s texts (FILLER sentences by default), drawn by ``rng``."""
    out: list[str] = []
    while sum(len(s) + 1 for s in out) < chars:
        out.append(rng.choice(pool))
    return " ".join(out)


def long_turn(said: str, rng: random.Random, filler_chars: tuple[int, int, int] = FILLER_CHARS,
              pool: Sequence[str] = FILLER) -> str:
    """``said`` inside an assistant-style turn: ~1 KB of filler before it, ~0.3–0.8 KB after (``filler_chars``),
    drawn from ``pool``."""
    before, low, high = filler_chars
    return (f"assistant: {filler(before, rng, pool)} Earlier in our chat — {said} "
            f"{filler(rng.randint(low, high), rng, pool)}")


LONG_SHARE = 1 / 3   # the share of the other turns wrapped too


def inputs(conv, rng: random.Random, evidence: set[str],  # type: ignore[no-untyped-def]
           filler_chars: tuple[int, int, int] = FILLER_CHARS, share: float = LONG_SHARE, from_turns: bool = False,
           ) -> list[tuple[str, pb.MemoryInput]]:
    """Each turn of ``conv`` as a memory: the evidence turns (and ``share`` of the others) wrapped in a long turn.
    ``from_turns``: the filler is the conversation's own turns that are no question's evidence (talk about the same
    people and topics, as the rest of a real long turn is) instead of FILLER's generic sentences."""
    pool = [f"{t.speaker}: {t.text}" for t in conv.turns if t.id not in evidence] if from_turns else FILLER
    out = []
    for t in conv.turns:
        said = f"{t.speaker}: {t.text}"
        text = long_turn(said, rng, filler_chars, pool) if t.id in evidence or rng.random() < share else said
        out.append((t.id, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=t.created_at * 1000,
                                         source_ref=t.id)))
    return out


BUCKETS = (5, 10, 20, 50, 100)


def positions(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, int]:
    """Evidence turns by where ``run`` ranks them: in the top 5, 6-10, ..., 51-100, or not in the run."""
    out = {f"top {b}": 0 for b in BUCKETS} | {"missing": 0}
    for qid, rel in qrels.items():
        ranked = run.get(qid, [])
        for doc in rel:
            rank = ranked.index(doc) + 1 if doc in ranked else None
            out[next((f"top {b}" for b in BUCKETS if rank is not None and rank <= b), "missing")] += 1
    return out


def where(server: EvalServer, conversations, tenants, queries, qrels) -> dict[str, dict[str, int]]:  # type: ignore[no-untyped-def]
    """Evidence positions in each first-stage list (top 100 of 100 candidates) and at the defaults (top 50)."""
    out = {}
    lists: tuple[tuple[str, Stage, int], ...] = (("dense", DENSE, 100), ("bm25", BM25, 100), ("fused", HYBRID, 100),
                                                 ("defaults", DEFAULTS, 50))
    for name, stage, k in lists:
        run: dict[str, list[str]] = {}
        for conv in conversations:
            run.update(server.search(tenants[conv.id], queries[conv.id], stage, now_ms=conv.now * 1000, top_k=k,
                                     candidates=100 if k == 100 else 0))
        out[name] = positions(run, qrels)
    return out


def consolidation(server: EvalServer, tenant: Ingested, evidence: set[str],
                  contents: dict[str, str]) -> Counter[str]:
    """Consolidates ``tenant`` now: its clusters and members, the long ones (past ``passages.PASSAGE_CHARS``), and
    the evidence turns folded under another turn's text (a default search returns the representative's content,
    not theirs; the harness still counts a hit on it for every member, so recall understates that loss)."""
    from server.engine.passages import PASSAGE_CHARS

    reply = server.consolidate(tenant)
    out: Counter[str] = Counter(clusters=reply.clusters, consolidated=reply.consolidated)
    for c in reply.consolidations:
        for member in c.consolidates:
            docs = tenant.docs_of.get(member, [])
            out["long_members"] += any(len(contents[d]) > PASSAGE_CHARS for d in docs)
            out["evidence_folded_under_another"] += any(d in evidence and contents[d] != c.content for d in docs)
    return out


def percentiles(ms: list[float]) -> dict[str, float]:
    """p50 and p95 of the block searches' times (one query each)."""
    ordered = sorted(ms)
    return {"p50_ms": round(ordered[len(ordered) // 2], 1), "p95_ms": round(ordered[int(len(ordered) * 0.95)], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "held_out"), default="dev")
    parser.add_argument("--first-tokens", action="store_true", help="also the cross-encoder on first tokens")
    parser.add_argument("--discounts", default="", help="comma-separated tiered.PASSAGE_DISCOUNT values to add")
    parser.add_argument("--where", action="store_true", help="also where the evidence ranks in each list")
    parser.add_argument("--main-only", action="store_true", help="also the dense side on main vectors alone")
    parser.add_argument("--ce-windows", default="", help="comma-separated passages.TURN_WINDOW values to add")
    parser.add_argument("--ce-reads", default="",
                        help="comma-separated passages.TURN_READS values to add (windows of a long turn the "
                             "cross-encoder reads, the best logit kept; 1: best_window's alone)")
    parser.add_argument("--ce-sentences", default="",
                        help="comma-separated passages.TURN_SENTENCES values to add (sentence units of a long turn "
                             "the cross-encoder reads, the best logit kept; -1: every unit; n: each without the "
                             "memory's context; f: the unit at the closest passage vector first; a: the units after "
                             "the first apart from those taken)")
    parser.add_argument("--every-word", action="store_true",
                        help="also the cross-encoder's window of a long memory chosen by every query word of three "
                             "letters or more, function words too (passages.SKIP_FUNCTION_WORDS off)")
    parser.add_argument("--windows", default="",
                        help="comma-separated WIDTH/LIMIT pairs (advanced.turn_passage_tokens/turn_passage_vectors; "
                             "0/L: advanced.passage_vectors L, the model's window): one more "
                             "index each, searched at the defaults")
    parser.add_argument("--quick", action="store_true", help="search the first index at the defaults alone")
    parser.add_argument("--one-client", action="store_true",
                        help="the latency-target controller on and every search alone: the depth this machine gives "
                             "one client's idle queries (reported per variant)")
    parser.add_argument("--consolidate", action="store_true",
                        help="run consolidation on each conversation's tenant after it is written (what the server's "
                             "background job does every advanced.consolidate_interval_s)")
    parser.add_argument("--consolidate-any-length", action="store_true",
                        help="with --consolidate: members of any length (hygiene.consolidate.MAX_CHARS off, the rule "
                             "before the limit)")
    parser.add_argument("--depths", default="0",
                        help="comma-separated cross-encoder depths (memories read) to run each variant at; 0: the "
                             "server's default (what the latency-target controller may lower under a budget)")
    parser.add_argument("--filler", default=",".join(map(str, FILLER_CHARS)),
                        help="filler characters before the said line, and the least and most after it")
    parser.add_argument("--skip-default", action="store_true",
                        help="with --quick: only the --ce-reads / --ce-windows variants (the defaults measured before)")
    parser.add_argument("--filler-from-turns", action="store_true",
                        help="the filler drawn from the conversation's own turns that are no question's evidence")
    parser.add_argument("--no-speaker-list", action="store_true",
                        help="also without the named speaker's own dense list (speakers.SPEAKER_LIST off)")
    parser.add_argument("--no-query-adapter", action="store_true",
                        help="also the dense side searching with the query's own vector (the pipeline's query_adapter "
                             "off)")
    parser.add_argument("--dense-focus", action="store_true",
                        help="also the cross-encoder's window of a long turn where its passage vector closest to the "
                             "query lies, not by words (passages.DENSE_FOCUS on)")
    parser.add_argument("--long-share", type=float, default=LONG_SHARE,
                        help="share of the turns without evidence wrapped too (1: every turn ~1-2 KB)")
    parser.add_argument("--rerankers", default="",
                        help="comma-separated cross-encoder folders, each a variant at the defaults on the same index")
    parser.add_argument("--out", type=Path, default=None,
                        help="default benchmarks/results/quality/long_turns[_held_out].json")
    args = parser.parse_args(argv)
    out_path = args.out or repo_root() / "benchmarks" / "results" / "quality" / (
        "long_turns.json" if args.split == "dev" else "long_turns_held_out.json")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from server.engine import passages
    from server.hygiene import consolidate
    from server.index import tiered
    from server.lexical import lucene

    if args.consolidate_any_length:
        consolidate.MAX_CHARS = 10**9
    filler_chars = tuple(int(c) for c in args.filler.split(","))
    assert len(filler_chars) == 3, "--filler BEFORE,AFTER_MIN,AFTER_MAX"
    windows_sweep = [tuple(int(x) for x in pair.split("/")) for pair in args.windows.split(",") if pair.strip()]
    conversations = [c for c in load_locomo() if (c.id in LOCOMO_DEV) == (args.split == "dev")]
    rng = random.Random(20260101)
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                     "command": command_line(),
                     "split": args.split, "conversations": [c.id for c in conversations], "variants": {},
                     "filler_chars": list(filler_chars), "long_share": args.long_share,
                     "filler_from_turns": args.filler_from_turns}
    # Near-duplicate merging off: the filler makes long turns' vectors alike (at the default threshold 79 of conv-26's
    # 419 turns merged into others), which would measure merging, not reading. The background consolidation off too:
    # its first tick (10 minutes in) would change the index under the variants that run after it (--consolidate
    # runs it once, before every variant).
    overrides = {"memory": {"audit_searches": False},
                 "advanced": {"dedupe_cosine": 1.01, "consolidate_interval_s": 0}}
    default_discount = tiered.PASSAGE_DISCOUNT
    # (name, dense side reads passage vectors, PASSAGE_CHARS or None, passage discount, BM25 reads windows)
    variants = [("passage vectors + BM25 windows + best passage (default)", True, None, default_discount, True),
                ("passage vectors + BM25 windows, cross-encoder window 800 (before)", True, None, default_discount,
                 True),
                ("passage vectors, BM25 without windows", True, None, default_discount, False)]
    if args.quick:
        variants = variants[:1] if not args.skip_default else []
    if args.main_only:
        variants.append(("main vector only, BM25 without windows (before passages)", False, None, default_discount,
                         False))
    variants += [(f"passage vectors, discount {d}", True, None, float(d), True) for d in args.discounts.split(",")
                 if d.strip() and float(d) != default_discount]
    if args.first_tokens:
        variants.append(("passage vectors + first tokens", True, 10**9, default_discount, True))
    windows = [int(w) for w in args.ce_windows.split(",") if w.strip()]
    with tempfile.TemporaryDirectory(prefix="engram-long-") as tmp, EvalServer(Path(tmp) / "data", overrides=overrides,
                                                                               one_client=args.one_client) as server:
        tenants, qrels, queries, items_of = {}, {}, {}, {}
        consolidated: Counter[str] = Counter()
        long_chars = []
        ingest_s = 0.0
        for conv in conversations:
            evidence = {d for q in conv.questions for d in q.evidence}
            items = items_of[conv.id] = inputs(conv, rng, evidence, filler_chars, args.long_share,
                                               args.filler_from_turns)
            long_chars += [len(m.content) for _, m in items if len(m.content) > filler_chars[0]]
            tenants[conv.id] = server.ingest(f"long-{conv.id}", items)
            ingest_s += tenants[conv.id].seconds
            if args.consolidate:
                consolidated += consolidation(server, tenants[conv.id], evidence,
                                              {i: m.content for i, m in items})
            queries[conv.id] = [Query(id=q.id, text=q.text) for q in conv.questions]
            qrels.update({q.id: {d: 1 for d in q.evidence} for q in conv.questions})
        if args.consolidate:
            results["consolidation"] = {"max_chars": consolidate.MAX_CHARS, **consolidated}
            log.info("consolidation: %s", results["consolidation"])
        turns = sum(len(c.turns) for c in conversations)
        registry = server._app.engine.registry   # type: ignore[union-attr]
        shards = [registry.shard(t.tenant) for t in tenants.values()]
        results["turns"] = turns
        results["long_turns"] = len(long_chars)
        results["long_turn_chars_mean"] = round(sum(long_chars) / len(long_chars))
        results["passage_vectors"] = sum(s.dense.passage_vectors for s in shards)
        results["memories_with_passages"] = sum(len(s.store.passage_counts()) for s in shards)
        results["ingest_memories_per_s"] = round(turns / ingest_s, 1)
        results["bm25_documents"] = sum(s.lexical.count() for s in shards)
        stage = server._app.engine.write_stage   # type: ignore[union-attr]
        pair_cache = server._app.engine.pair_cache   # type: ignore[union-attr]
        results["passage_tokens"], results["passage_limit"] = stage.embedder.passage_tokens, stage.passages
        results["turn_passage_tokens"], results["turn_passage_limit"] = stage.turn_tokens, stage.turn_passages
        results["indexes"] = {}
        for width, limit in windows_sweep:   # the same turns again, under other dense passage windows
            saved_windows = (stage.turn_tokens, stage.turn_passages, stage.passages)
            stage.turn_tokens, stage.turn_passages = width, limit
            stage.passages = stage.passages if width else limit
            try:
                other = {conv.id: server.ingest(f"long-{conv.id}-{width}-{limit}", items_of[conv.id])
                         for conv in conversations}
            finally:
                stage.turn_tokens, stage.turn_passages, stage.passages = saved_windows
            index = [registry.shard(t.tenant) for t in other.values()]
            run, block, ms = {}, {}, []
            t0 = time.perf_counter()
            for conv in conversations:
                run.update(server.search(other[conv.id], queries[conv.id], DEFAULTS, now_ms=conv.now * 1000, top_k=10))
                pair_cache.forget_tenant(other[conv.id].tenant)   # each block search's time without cached pairs
                docs, times = server.block_docs(other[conv.id], queries[conv.id], now_ms=conv.now * 1000)
                block.update(docs)
                ms += times
            top = evaluate(run, qrels, ks=(5, 10))
            results["indexes"][f"{width}/{limit}"] = {
                "passage_tokens": width, "passage_limit": limit,
                "passage_vectors": sum(s.dense.passage_vectors for s in index),
                "ingest_memories_per_s": round(turns / sum(t.seconds for t in other.values()), 1),
                "recall@10": round(top["recall@10"], 4), "recall@5": round(top["recall@5"], 4),
                "block_recall": round(block_recall(block, qrels, list(qrels)), 4),
                "seconds": round(time.perf_counter() - t0, 1), **percentiles(ms)}
            log.info("long turns, windows %d/%d: %s", width, limit, results["indexes"][f"{width}/{limit}"])
        saved = (passages.PASSAGE_CHARS, tiered.SEARCH_PASSAGES, tiered.PASSAGE_DISCOUNT, lucene.SEARCH_WINDOWS,
                 passages.TURN_WINDOW, passages.TURN_READS, passages.TURN_SENTENCES)
        variants += [(f"cross-encoder window {w} chars", True, None, default_discount, True) for w in windows]
        variants += [(f"cross-encoder reads {r.rstrip('n')} windows{' without context' if r.endswith('n') else ''}",
                      True, None, default_discount, True)
                     for r in (x.strip() for x in args.ce_reads.split(",") if x.strip()) if r != str(saved[5])]
        variants += [(f"cross-encoder reads {'every' if int(n.rstrip('afns')) < 0 else n.rstrip('afns')} sentence units"
                      f"{' apart' if 'a' in n else ''}{' with the speaker' if 's' in n else ''}"
                      f"{' at the closest passage vector' if 'f' in n else ''}{' without context' if 'n' in n else ''}",
                      True, None, default_discount, True)
                     for n in (x.strip() for x in args.ce_sentences.split(",") if x.strip()) if n != str(saved[6])]
        if args.every_word:
            variants.append(("cross-encoder window by every word", True, None, default_discount, True))
        if args.dense_focus:
            variants.append(("cross-encoder window at the closest passage vector", True, None, default_discount, True))
        if args.no_speaker_list:
            variants.append(("no speaker list", True, None, default_discount, True))
        if args.no_query_adapter:
            variants.append(("no query adapter", True, None, default_discount, True))
        variants += [(f"{RERANKER_VARIANT}{path}", True, None, default_discount, True)
                     for path in (x.strip() for x in args.rerankers.split(",")) if path]
        depths = [int(d) for d in args.depths.split(",") if d.strip()]
        variants = [(f"{name} at depth {depth}" if depth else name, *rest, depth)
                    for name, *rest in variants for depth in depths]
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]
        saved_depth = pipeline.default_rerank_depth
        saved_focus, saved_list, saved_adapter = pipeline.dense_focus, pipeline.speaker_list, pipeline.query_adapter
        saved_sentence_context, saved_unit_speaker = passages.SENTENCE_CONTEXT, passages.UNIT_SPEAKER
        try:
            for name, dense_passages, chars, discount, bm25_windows, depth in variants:
                pipeline.default_rerank_depth = depth or saved_depth
                kind = re.sub(r" at depth \d+$", "", name)
                passages.PASSAGE_CHARS = chars or saved[0]
                window = re.search(r"cross-encoder window (\d+)", name)
                passages.TURN_WINDOW = int(window.group(1)) if window else saved[4]
                reads = re.search(r"cross-encoder reads (\d+) windows", name)
                passages.TURN_READS = int(reads.group(1)) if reads else saved[5]
                units = re.search(r"cross-encoder reads (\w+) sentence units", name)
                passages.TURN_SENTENCES = (-1 if units.group(1) == "every" else int(units.group(1))) if units else (
                    0 if re.search(r"cross-encoder (window|reads \d+ windows)", name) else saved[6])   # windows
                passages.SENTENCE_CONTEXT = "without context" not in name if units else saved_sentence_context
                passages.UNITS_APART = " sentence units apart" in name
                passages.UNIT_SPEAKER = " with the speaker" in name if units else saved_unit_speaker
                passages.TURN_READ_CONTEXT = "without context" not in name
                passages.SKIP_FUNCTION_WORDS = kind != "cross-encoder window by every word"
                pipeline.dense_focus = ("at the closest passage vector" in name
                                        or saved_focus and "window" not in name)
                pipeline.speaker_list = saved_list and kind != "no speaker list"
                pipeline.query_adapter = None if kind == "no query adapter" else saved_adapter
                tiered.SEARCH_PASSAGES, tiered.PASSAGE_DISCOUNT = dense_passages, discount
                lucene.SEARCH_WINDOWS = bm25_windows
                other = kind.removeprefix(RERANKER_VARIANT) if kind.startswith(RERANKER_VARIANT) else ""
                with server.reranker_swapped(other) if other else contextlib.nullcontext():
                    run, block, ms = {}, {}, []
                    server.depths_used.clear()
                    t0 = time.perf_counter()
                    for conv in conversations:
                        now_ms = conv.now * 1000
                        pair_cache.forget_tenant(tenants[conv.id].tenant)   # no pair scored by a variant before
                        run.update(server.search(tenants[conv.id], queries[conv.id], DEFAULTS, now_ms=now_ms, top_k=10))
                        pair_cache.forget_tenant(tenants[conv.id].tenant)
                        docs, times = server.block_docs(tenants[conv.id], queries[conv.id], now_ms=now_ms)
                        block.update(docs)
                        ms += times
                top = evaluate(run, qrels, ks=(5, 10))
                results["variants"][name] = {"rerank_depth": pipeline.default_rerank_depth,
                                             "recall@10": round(top["recall@10"], 4),
                                             "recall@5": round(top["recall@5"], 4),
                                             "block_recall": round(block_recall(block, qrels, list(qrels)), 4),
                                             "queries": len(qrels), "seconds": round(time.perf_counter() - t0, 1),
                                             "mean_depth_used": round(statistics.mean(server.depths_used), 2),
                                             **percentiles(ms)}
                log.info("long turns, %s: %s", name, results["variants"][name])
                if args.where and chars is None and discount == default_discount and dense_passages:
                    results["variants"][name]["where"] = where(server, conversations, tenants, queries, qrels)
                    log.info("where the evidence ranks: %s", results["variants"][name]["where"])
        finally:
            (passages.PASSAGE_CHARS, tiered.SEARCH_PASSAGES, tiered.PASSAGE_DISCOUNT, lucene.SEARCH_WINDOWS,
             passages.TURN_WINDOW, passages.TURN_READS, passages.TURN_SENTENCES) = saved
            passages.TURN_READ_CONTEXT = True
            passages.SENTENCE_CONTEXT = saved_sentence_context
            passages.UNITS_APART = False
            passages.UNIT_SPEAKER = saved_unit_speaker
            passages.SKIP_FUNCTION_WORDS = True
            pipeline.dense_focus, pipeline.speaker_list = saved_focus, saved_list
            pipeline.query_adapter = saved_adapter
            pipeline.default_rerank_depth = saved_depth
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
