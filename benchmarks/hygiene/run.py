"""Memory hygiene on the LoCoMo dev conversations, at the server defaults, side by side (README "Memory hygiene").

Two servers over the same turns (written one by one as "<speaker>: <text>", the quality harness's headline):
``before`` (salience does not touch importance: SALIENCE_IMPORTANCE_SPAN 0, no consolidation: the
figure of the ranking issue) and ``defaults`` (this issue's defaults), then ``defaults`` again after the
Consolidate RPC. Reported: recall@10 of each; for each memory.min_salience threshold the share of turns it
would drop and the recall@10 left (top 30 at the defaults with the dropped turns taken out, then the first 10:
what a search over the remaining memories returns, up to BM25 statistics); the consolidation's clusters and
the duplicate share in the top 10 before and after (a hit is a duplicate when a higher hit is in its
cluster); the recall gate's wrong-skip rate on the questions, its skip rate on chit-chat (the dev turns below
salience 0.05, and every dev turn) and the latency of a skipped recall against a full one.

Run: ``nice -n 10 .venv/bin/python -m benchmarks.hygiene.run`` → benchmarks/results/hygiene/{hygiene.json,hygiene.png}
"""

from __future__ import annotations

import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.quality.datasets import Query, evaluate, load_locomo, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer, Ingested
from benchmarks.quality.suites import locomo_inputs
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.engine.ranking import IMPORTANCE_WEIGHT
from server.hygiene import writes
from server.hygiene.consolidate import CONSOLIDATE_COSINE
from server.hygiene.salience import DEFAULT_IMPORTANCE, load_salience

log = logging.getLogger(__name__)
OUT = repo_root() / "benchmarks" / "results" / "hygiene"
THRESHOLDS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
CHITCHAT_SALIENCE = 0.05


def _recall(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    return round(evaluate(run, qrels, ks=(10,))["recall@10"], 4)


def _run(tenant: Ingested, hits: dict[str, list[pb.Hit]], *, keep: set[str] | None = None, k: int = 10) -> dict:
    out = {}
    for qid, hs in hits.items():
        docs = [d for h in hs for d in tenant.docs_of.get(h.memory.memory_id, ())]
        out[qid] = [d for d in docs if keep is None or d in keep][:k]
    return out


def _duplicate_share(hits: dict[str, list[pb.Hit]], cluster_of: dict[str, int]) -> float:
    dup = total = 0
    for hs in hits.values():
        seen: set[int] = set()
        for h in hs[:10]:
            total += 1
            c = cluster_of.get(h.memory.memory_id)
            if c is not None and c in seen:
                dup += 1
            if c is not None:
                seen.add(c)
    return round(dup / max(1, total), 4)


SPANS = (0.0, 0.1, 0.2, 0.4, 0.6, 0.8)


def _span_sweep(server: EvalServer, conversations: list, tenants: dict, by_conv: dict, qrels: dict,
                salience: dict[str, float]) -> list[dict]:
    """recall@10 for each salience importance span, recomputed from the top 30 of a span-0 run: each hit's
    final score has its importance factor (0.5 + 0.5 x 0.5) replaced by the one its salience would give."""
    b = IMPORTANCE_WEIGHT
    default = DEFAULT_IMPORTANCE
    rows = []
    for span in SPANS:
        run = {}
        for c in conversations:
            t = tenants[c.id]
            for qid, hs in by_conv[c.id].items():
                def score(h: pb.Hit) -> float:
                    docs = t.docs_of.get(h.memory.memory_id, ())
                    s = max((salience.get((c.id, d), 0.0) for d in docs), default=0.0)
                    imp = min(1.0, max(0.0, default + span * (s - 0.5)))
                    return h.breakdown.final / max(h.breakdown.importance_weight, 1e-9) * ((1 - b) + b * imp)
                ranked = sorted(hs, key=lambda h: -score(h))
                run[qid] = [d for h in ranked for d in t.docs_of.get(h.memory.memory_id, ())][:10]
        rows.append({"salience_importance_span": span, "recall@10": _recall(run, qrels)})
    return rows


def _ingest_and_search(server: EvalServer, name: str, conversations: list, *, top_k: int) -> tuple[dict, dict]:
    tenants, hits = {}, {}
    for conv in conversations:
        tenant = server.ingest(f"{name}-{conv.id}", locomo_inputs(conv, "speaker"))
        tenants[conv.id] = tenant
        queries = [Query(id=q.id, text=q.text) for q in conv.questions]
        hits.update(server.search_hits(tenant, queries, DEFAULTS, now_ms=conv.now * 1000, top_k=top_k))
    return tenants, hits


def _gate(server: EvalServer, tenant: Ingested, texts: list[str]) -> tuple[list[str], list[float]]:
    skipped, latencies = [], []
    for i in range(0, len(texts), 64):
        chunk = texts[i:i + 64]
        # what passes the gate is searched as cheaply as possible (BM25, one hit): only the decision is counted
        reply = server._memory.Search(spb.SearchRequest(tenant_id=tenant.tenant, queries=[
            pb.SearchQuery(text=t, gate=True, top_k=1, lexical_only=True, rerank_depth=-1) for t in chunk]),
            metadata=server._metadata, timeout=600)
        skipped += [r.skipped for r in reply.results]
    return skipped, latencies  # latencies: see _latency_ms


def _latency_ms(server: EvalServer, tenant: Ingested, text: str, *, gate: bool, n: int = 30) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        server._memory.Search(spb.SearchRequest(tenant_id=tenant.tenant, queries=[pb.SearchQuery(text=text, gate=gate)]),
                              metadata=server._metadata, timeout=600)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    conversations = load_locomo()
    qrels = {q.id: {d: 1 for d in q.evidence} for c in conversations for q in c.questions}
    model = load_salience()
    # turn ids ("D1:3") repeat across conversations: keyed by (conversation, turn)
    salience = {(c.id, t.id): model.score(f"{t.speaker}: {t.text}") for c in conversations for t in c.turns}
    evidence = {(c.id, d) for c in conversations for q in c.questions for d in q.evidence}
    out: dict[str, Any] = {"dataset": "LoCoMo dev (5 conversations)", "turns": len(salience),
                           "questions": len(qrels), "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"memory": {"consolidate_interval_s": 0.0}}
        # the span is a constant of the salience step: this server's SaliencePolicy is built with 0
        with mock.patch.object(writes, "SALIENCE_IMPORTANCE_SPAN", 0.0), \
                EvalServer(Path(tmp) / "before", overrides=overrides) as server:
            tenants, hits = _ingest_and_search(server, "before", conversations, top_k=30)
            by_conv = {c.id: {q.id: hits[q.id] for q in c.questions} for c in conversations}
            out["variants"]["before"] = {"recall@10": _recall(
                {q: r for c in conversations for q, r in _run(tenants[c.id], by_conv[c.id]).items()}, qrels)}
            out["salience_importance_span"] = _span_sweep(server, conversations, tenants, by_conv, qrels, salience)
        with EvalServer(Path(tmp) / "defaults", overrides={"memory": {"consolidate_interval_s": 0.0}}) as server:
            tenants, hits = _ingest_and_search(server, "defaults", conversations, top_k=30)
            by_conv = {c.id: {q.id: hits[q.id] for q in c.questions} for c in conversations}
            run = {q: r for c in conversations for q, r in _run(tenants[c.id], by_conv[c.id]).items()}
            out["variants"]["defaults"] = {"recall@10": _recall(run, qrels),
                                           "salience_importance_span": writes.SALIENCE_IMPORTANCE_SPAN}
            rows = []
            for t in THRESHOLDS:
                keep = {d for d, s in salience.items() if s >= t}
                kept = {q: r for c in conversations for q, r in _run(
                    tenants[c.id], by_conv[c.id], keep={d for cid, d in keep if cid == c.id}).items()}
                rows.append({"min_salience": t, "turns_dropped": round(1 - len(keep) / len(salience), 4),
                             "evidence_turns_dropped": round(len(evidence - keep) / len(evidence), 4),
                             "recall@10": _recall(kept, qrels)})
            out["min_salience"] = rows
            # the recall gate on every question and on the dev turns as messages
            questions = [q.text for c in conversations for q in c.questions]
            turns = [(t.text, salience[(c.id, t.id)]) for c in conversations for t in c.turns]
            first = tenants[conversations[0].id]
            q_skips, _ = _gate(server, first, questions)
            t_skips, _ = _gate(server, first, [t for t, _ in turns])
            low = [s for s, (_, sal) in zip(t_skips, turns, strict=True) if sal < CHITCHAT_SALIENCE]
            out["gate"] = {"questions": len(questions), "questions_skipped": sum(bool(s) for s in q_skips),
                           "wrong_skip_rate": round(sum(bool(s) for s in q_skips) / len(questions), 4),
                           "chitchat_turns": len(low), "chitchat_skip_rate": round(sum(bool(s) for s in low) / len(low), 4),
                           "all_turns_skip_rate": round(sum(bool(s) for s in t_skips) / len(t_skips), 4),
                           "examples_skipped": sorted({t for (t, _), s in zip(turns, t_skips, strict=True) if s})[:15],
                           "latency_ms_skipped_p50": _latency_ms(server, first, "Thanks, talk to you soon!", gate=True),
                           "latency_ms_full_p50": _latency_ms(server, first, "Thanks, talk to you soon!", gate=False)}
            # consolidation
            cluster_of: dict[str, int] = {}
            clusters = consolidated = 0
            for c in conversations:
                reply = server._memory.Consolidate(spb.ConsolidateRequest(tenant_id=tenants[c.id].tenant),
                                                   metadata=server._metadata, timeout=600)
                clusters += reply.clusters
                consolidated += reply.consolidated
                for n, cons in enumerate(reply.consolidations):
                    key = hash((c.id, n))
                    for mid in cons.consolidates:
                        cluster_of[mid] = key
                    cluster_of[cons.memory_id] = key
                    tenants[c.id].docs_of[cons.memory_id] = [d for mid in cons.consolidates
                                                             for d in tenants[c.id].docs_of.get(mid, [])]
            after = {}
            for c in conversations:
                queries = [Query(id=q.id, text=q.text) for q in c.questions]
                after.update(server.search_hits(tenants[c.id], queries, DEFAULTS, now_ms=c.now * 1000, top_k=10))
            run_after = {q: r for c in conversations for q, r in _run(
                tenants[c.id], {q.id: after[q.id] for q in c.questions}).items()}
            out["consolidation"] = {"consolidate_cosine": CONSOLIDATE_COSINE, "clusters": clusters,
                                    "episodic_consolidated": consolidated,
                                    "duplicate_share_top10_before": _duplicate_share(hits, cluster_of),
                                    "duplicate_share_top10_after": _duplicate_share(after, cluster_of)}
            out["variants"]["defaults+consolidation"] = {"recall@10": _recall(run_after, qrels)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "hygiene.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    _plot(out)
    print(json.dumps(out, indent=1, ensure_ascii=False))


def _plot(out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    rows = out["min_salience"]
    a.plot([r["min_salience"] for r in rows], [r["turns_dropped"] for r in rows], "o-", label="turns dropped")
    a.plot([r["min_salience"] for r in rows], [r["evidence_turns_dropped"] for r in rows], "s-", label="evidence turns dropped")
    a.plot([r["min_salience"] for r in rows], [r["recall@10"] for r in rows], "^-", label="recall@10")
    a.set_xscale("symlog", linthresh=0.005)
    a.set_xlabel("memory.min_salience")
    a.set_title("LoCoMo dev: what a salience threshold drops")
    a.legend()
    names = list(out["variants"])
    b.bar(names, [out["variants"][n]["recall@10"] for n in names])
    for i, n in enumerate(names):
        b.text(i, out["variants"][n]["recall@10"] + 0.005, f'{out["variants"][n]["recall@10"]:.3f}', ha="center")
    b.set_ylim(0, 1)
    b.set_title("recall@10 at the defaults")
    fig.tight_layout()
    fig.savefig(OUT / "hygiene.png", dpi=110)


if __name__ == "__main__":
    main()
