"""What the extractor's review of update links can give the recency sets, with a reviewer that knows the answer.

    .venv/bin/python -m benchmarks.quality.link_review [--sets recency,recency_dev2,...] [--out PATH]

No model runs offline, so the review (server/hygiene/link_review.py) is measured with an OpenAI-compatible endpoint
started here that answers from each set's labels: an item's new statement updates an offered earlier one when the
two are a labelled change (the stale and the relevant memory of a "newer", "past" or "first" question), else none.
That is the ceiling of the mechanism — what a reviewer that is always right about what it is shown gives — and a
second reviewer, wrong on a seeded fifth of its answers (another offered statement or none), shows what errors
cost. Each set is written once per server at the defaults (the rules link what they link), the review is awaited,
and the set is searched at the defaults: recall@1, the links, and the requests and items the review sent. The rules
alone (no extractor) are the first row. Writes ``benchmarks/results/quality/link_review.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality import suites
from benchmarks.quality.chat_endpoint import ChatEndpoint
from benchmarks.quality.datasets import RECENCY_SETS, load_recency, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.link_probe import CHANGE_KINDS, write_result

Answer = Callable[[dict], str | None]   # one review item → the offered id it updates, or None


class Endpoint:
    """Review requests (``items``) answered by ``answer``; extraction requests (``turns``) get no facts."""

    def __init__(self) -> None:
        self.answer: Answer = lambda item: None
        self.requests = 0
        self.items = 0
        self.extractions = 0
        self.chat = ChatEndpoint(self._reply)
        self.url = self.chat.url

    def _reply(self, body: dict) -> tuple[float, str]:
        data = json.loads(body["messages"][1]["content"])
        if "items" not in data:
            self.extractions += 1
            return 0.0, "[]"
        self.requests += 1
        self.items += len(data["items"])
        return 0.0, json.dumps({"updates": [{"n": it["n"], "earlier": self.answer(it)} for it in data["items"]]})


def oracle(name: str, wrong: float = 0.0, seed: int = 0) -> tuple[Answer, dict[str, int]]:
    """A reviewer of set ``name`` from its labels, wrong on a ``wrong`` share of its answers; and its counts."""
    rs = load_recency(name=name)
    eval_id = {m.content: m.id for m in rs.memories}
    assert len(eval_id) == len(rs.memories), f"{name}: texts are not unique"
    changes = {pair for q in rs.queries if rs.kind[q.id] in CHANGE_KINDS
               for a in rs.stale[q.id] for b in rs.qrels[q.id] for pair in ((a, b), (b, a))}
    rng = random.Random(seed)
    counts = {"items": 0, "labelled change offered": 0, "wrong answers": 0}

    def answer(item: dict) -> str | None:
        counts["items"] += 1
        new = eval_id[item["new"]["text"]]
        right = next((e["id"] for e in item["earlier"] if (eval_id[e["text"]], new) in changes), None)
        counts["labelled change offered"] += right is not None
        if wrong and rng.random() < wrong:
            counts["wrong answers"] += 1
            return rng.choice([None, *[e["id"] for e in item["earlier"]]] if right is None else
                              [None, *[e["id"] for e in item["earlier"] if e["id"] != right]])
        return right

    return answer, counts


def run_set(server: EvalServer, name: str, endpoint: Endpoint | None, answer: Answer | None) -> dict[str, Any]:
    rs = load_recency(name=name)
    if endpoint is not None and answer is not None:
        endpoint.answer = answer
    before = (endpoint.requests, endpoint.items) if endpoint is not None else (0, 0)
    reviewer = server._app.engine.extractor.reviewer   # type: ignore[union-attr]
    outcomes = ("confirmed", "made", "removed", "refused", "failed")
    was = {k: getattr(reviewer.stats, k) for k in outcomes}
    tenant = server.ingest(name, suites.recency_inputs(rs))
    asyncio.run_coroutine_threadsafe(reviewer.idle(), server._loop).result(600)
    shard = server._app.engine.registry.shard(tenant.tenant)   # type: ignore[union-attr]
    links = sum(len(m.updates) for m in shard.store.all())
    run = server.search(tenant, rs.queries, DEFAULTS, now_ms=suites.RECENCY_NOW_MS, top_k=10)
    hit = {q.id: bool(run[q.id]) and run[q.id][0] in rs.qrels[q.id] for q in rs.queries}
    kinds = sorted(set(rs.kind.values()))
    out = {"recall@1": round(float(np.mean(list(hit.values()))), 3), "links": links,
           **{k: round(float(np.mean([hit[q] for q in hit if rs.kind[q] == k])), 3) for k in kinds}}
    if endpoint is not None:
        out |= {"review requests": endpoint.requests - before[0], "review items": endpoint.items - before[1],
                **{f"links {k}": getattr(reviewer.stats, k) - was[k] for k in outcomes}}
    return out


def cost_locomo(endpoint: Endpoint) -> dict[str, Any]:
    """What the review asks of a model on chat turns: LoCoMo's five conversations written as the quality suites write
    them (each turn an EPISODIC ``"<speaker>: <text>"`` memory, in Writes of the harness's chunks), every review
    answered with none; the requests, the statements reviewed and the seconds the queue took to drain after the last
    Write."""
    import time

    from benchmarks.quality.datasets import load_locomo

    out: dict[str, Any] = {}
    endpoint.answer = lambda item: None
    overrides = {"memory": {"audit_searches": False, "extractor_url": endpoint.url, "extractor_model": "none"}}
    with tempfile.TemporaryDirectory(prefix="engram-link-review-") as tmp, \
            EvalServer(Path(tmp) / "data", overrides=overrides) as server:
        reviewer = server._app.engine.extractor.reviewer   # type: ignore[union-attr]
        for conv in load_locomo():
            before = (endpoint.requests, endpoint.items, endpoint.extractions, reviewer.stats.removed)
            tenant = server.ingest(f"locomo-{conv.id}", suites.locomo_inputs(conv))
            t0 = time.perf_counter()
            asyncio.run_coroutine_threadsafe(reviewer.idle(), server._loop).result(1800)
            out[conv.id] = {"turns": len(conv.turns), "write_s": round(tenant.seconds, 1),
                            "drain_s": round(time.perf_counter() - t0, 1), "rule_links": tenant.updates,
                            "review_requests": endpoint.requests - before[0],
                            "statements_reviewed": endpoint.items - before[1],
                            "extraction_requests": endpoint.extractions - before[2],
                            "rule_links_removed_by_none": reviewer.stats.removed - before[3]}
            print(conv.id, out[conv.id], flush=True)
    turns = sum(r["turns"] for r in out.values())
    out["per_1000_turns"] = {k: round(1000 * sum(r[k] for r in out.values()) / turns, 1)
                             for k in ("review_requests", "statements_reviewed", "extraction_requests")}
    return out


def plot(results: dict[str, dict[str, Any]], date: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(results)
    variants = list(results[sets[0]])
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        ax.bar([x + i * width for x in range(len(sets))], [results[s][v]["recall@1"] for s in sets], width=width,
               label=v)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(sets))], sets, fontsize=8)
    ax.axhline(0.85, color="grey", linewidth=0.8, linestyle=":")
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall@1")
    ax.set_title(f"update links reviewed by a model that knows the labels ({date})", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(RECENCY_SETS))
    parser.add_argument("--wrong", type=float, default=0.2, help="the noisy reviewer's share of wrong answers")
    parser.add_argument("--keep-rule-links", action="store_true",
                        help="the model's none keeps the rules' link (link_review.REVIEW_UNLINKS = False, in process)")
    parser.add_argument("--cost-locomo", action="store_true",
                        help="only the review's requests on LoCoMo's five conversations (writes link_review_cost.json)")
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality"
                        / "link_review.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.cost_locomo:
        endpoint = Endpoint()
        out = args.out if args.out.name != "link_review.json" else args.out.with_name("link_review_cost.json")
        write_result(out, "python -m benchmarks.quality.link_review --cost-locomo", {"locomo": cost_locomo(endpoint)})
        endpoint.chat.close()
        return 0
    sets = args.sets.split(",")
    if args.keep_rule_links:
        from server.hygiene import link_review
        link_review.REVIEW_UNLINKS = False
    results: dict[str, dict[str, Any]] = {s: {} for s in sets}
    endpoint = Endpoint()
    variants: list[tuple[str, float | None]] = [("rules (no extractor)", None),
                                                ("rules + a reviewer always right", 0.0),
                                                (f"rules + a reviewer wrong on {args.wrong:g}", args.wrong)]
    for label, wrong in variants:
        overrides = None if wrong is None else {"memory": {"audit_searches": False, "extractor_url": endpoint.url,
                                                           "extractor_model": "labels"}}
        with tempfile.TemporaryDirectory(prefix="engram-link-review-") as tmp, \
                EvalServer(Path(tmp) / "data", overrides=overrides) as server:
            for name in sets:
                answer, counts = oracle(name, wrong or 0.0) if wrong is not None else (None, {})
                row = run_set(server, name, endpoint if wrong is not None else None, answer)
                results[name][label] = row | counts
                print(f"{name:14s} {label:34s} {results[name][label]}", flush=True)
    endpoint.chat.close()
    write_result(args.out, "python -m benchmarks.quality.link_review" + (
        f" --sets {args.sets}" if args.sets != ",".join(RECENCY_SETS) else "")
        + (" --keep-rule-links" if args.keep_rule_links else ""), {"recency": results})
    plot(results, json.loads(args.out.read_text())["date"], args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
