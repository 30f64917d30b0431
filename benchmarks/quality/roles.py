"""A user and an assistant: the first-person rule of server/engine/speakers.py on LoCoMo written with roles.

    .venv/bin/python -m benchmarks.quality.roles [--split dev|held_out|all] [--limit N] [--out PATH]
                                                 [--long B,A1,A2] [--users both|one] [--conversations conv-41]
                                                 [--reranker PATH] [--default-only] [--unit-speaker]

A memory server for agents mostly holds chats between a user and an assistant, written with roles for speakers
(``"user: …"``, ``"assistant: …"``), and the user asks about them in the first person ("What did I research?"). No
such data ships in ../shared/data, so this builds it at run time from the LoCoMo conversations (nothing of LoCoMo is
written into the repository): for each conversation and each of its two speakers, one tenant where that speaker's
turns are the user's and the other's the assistant's, and every question that names that speaker and not the other,
rewritten in the first person (``first_person_question``: "What did Caroline research?" → "What did I research?",
"Caroline's" → "my"). Each tenant is written and searched as the block suite does (``benchmarks/quality/block.py``:
recall@10 and recall@5 of a top-10 search, and the evidence recall of the context block the SDK's ``recall`` gets),
with the first-person rule on (the default, ``speakers.FIRST_PERSON``) and off, in one in-process server at its
defaults (the background consolidation off, so both passes search one index). The rule's factor is the named
speaker's (``SPEAKER_FACTOR``, chosen on the LoCoMo dev conversations with names); nothing here is tuned, so both
halves are reported.

``--long 500,100,400`` writes every evidence turn and a third of the others as a long turn, the said line inside
filler (``benchmarks/quality/long_turns.py``'s sentences: B characters before it, A1–A2 after; 500,100,400 makes
~1 KB turns), each under its own speaker's role, near-duplicate merging off as in that suite. ``--users one`` makes
one tenant per conversation (its first speaker the user) instead of two. ``--unit-speaker`` adds a pass (first-person
rule on) with each sentence unit of a long turn read with the turn's speaker label, or without it where that is the
default (``server/engine/passages.py`` ``UNIT_SPEAKER``), on the same index. Writes
``benchmarks/results/quality/roles.json`` (or ``--out``) and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.quality.block import LOCOMO_DEV, category_rows
from benchmarks.quality.datasets import LOCOMO_CATEGORIES, Query, load_locomo, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.long_turns import LONG_SHARE, filler

log = logging.getLogger("benchmarks.quality.roles")

_AUX = {"did": "did", "does": "do", "do": "do", "has": "have", "have": "have", "is": "am", "was": "was",
        "were": "was", "can": "can", "could": "could", "would": "would", "will": "will", "should": "should",
        "might": "might", "may": "may"}


def _cased(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def first_person_question(text: str, name: str) -> str:
    """``text`` (a question about ``name``) as ``name`` would ask it: possessives → "my", the name after an
    auxiliary or at the start → "I" (the auxiliary agreeing), anywhere else → "me"; "she"/"he" → "I", "her"/"his"
    before a word → "my", "herself"/"himself" → "myself"."""
    n = re.escape(name)
    out = re.sub(rf"\b{n}['’]s\b", "my", text)
    out = re.sub(rf"\b({'|'.join(_AUX)}) {n}\b", lambda m: _cased(_AUX[m.group(1).lower()], m.group(1)) + " I", out,
                 flags=re.IGNORECASE)
    out = re.sub(rf"^{n}\b", "I", out)
    out = re.sub(rf"\b{n}\b", "me", out)
    out = re.sub(r"\b(?:she|he)\b", "I", out, flags=re.IGNORECASE)
    out = re.sub(r"\b(?:herself|himself)\b", "myself", out, flags=re.IGNORECASE)
    out = re.sub(r"\b(?:her|his)\b(?= \w)", "my", out, flags=re.IGNORECASE)
    out = re.sub(r"\bI (is|was|has|does)\b", lambda m: "I " + {"is": "am", "was": "was", "has": "have",
                                                               "does": "do"}[m.group(1)], out)
    return out[:1].upper() + out[1:]


def named(name: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def _wrapped(text: str, rng: random.Random, filler_chars: tuple[int, int, int]) -> str:
    before, low, high = filler_chars
    return f"{filler(before, rng)} {text} {filler(rng.randint(low, high), rng)}"


def role_tenants(conversations: Sequence, limit: int = 0, *,  # type: ignore[type-arg]
                 long: tuple[int, int, int] | None = None, users: str = "both") -> list[dict]:
    """One tenant per (conversation, user speaker): its inputs, its first-person questions and their qrels."""
    from engram_proto.v1 import messages_pb2 as pb

    out = []
    rng = random.Random(20260101)
    for conv in conversations:
        speakers = sorted({t.speaker for t in conv.turns})
        evidence = {d for q in conv.questions for d in q.evidence}
        for user in speakers[:1] if users == "one" else speakers:
            others = [s for s in speakers if s != user]
            inputs = []
            for t in conv.turns:
                text = t.text
                if long is not None and (t.id in evidence or rng.random() < LONG_SHARE):
                    text = _wrapped(text, rng, long)
                inputs.append((t.id, pb.MemoryInput(content=f"{'user' if t.speaker == user else 'assistant'}: {text}",
                                                    type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=t.created_at * 1000,
                                                    source_ref=t.id)))
            questions = [q for q in conv.questions if named(user, q.text) and not any(named(o, q.text)
                                                                                      for o in others)]
            if limit:
                questions = questions[:limit]
            out.append({"conv": conv.id, "user": user, "now_ms": conv.now * 1000, "inputs": inputs,
                        "queries": [Query(id=f"{q.id}@{user}", text=first_person_question(q.text, user))
                                    for q in questions],
                        "asked": {f"{q.id}@{user}": q.text for q in questions},
                        "qrels": {f"{q.id}@{user}": {d: 1 for d in q.evidence} for q in questions},
                        "category": {f"{q.id}@{user}": q.category for q in questions}})
    return out


def run(split: str = "all", limit: int = 0, *, long: tuple[int, int, int] | None = None, users: str = "both",
        only: frozenset[str] = frozenset(), reranker: str = "", rule_off: bool = True,
        unit_speaker: bool = False) -> dict:
    from server.engine import passages, speakers

    conversations = [c for c in load_locomo() if (split == "all" or (c.id in LOCOMO_DEV) == (split == "dev"))
                     and (not only or c.id in only)]
    specs = role_tenants(conversations, limit, long=long, users=users)
    qrels = {q: r for s in specs for q, r in s["qrels"].items()}
    category = {q: c for s in specs for q, c in s["category"].items()}
    half = {q: "dev" if s["conv"] in LOCOMO_DEV else "held_out" for s in specs for q in s["qrels"]}
    out: dict = {"split": split, "long": list(long) if long else None, "users": users,
                 "conversations": sorted(only) or "all", "reranker": reranker or "bundled",
                 "tenants": [{"conv": s["conv"], "user": s["user"], "questions": len(s["queries"])} for s in specs],
                 "examples": [{"asked": s["asked"][q.id], "as_the_user": q.text} for s in specs
                              for q in s["queries"][:3]], "variants": {}}
    saved = speakers.FIRST_PERSON, passages.UNIT_SPEAKER
    variants = [("first person on (default)", True, saved[1]), ("first person off", False, saved[1])][:1 + rule_off]
    if unit_speaker:
        variants.append((f"sentence units {'without' if saved[1] else 'with'} the speaker", True, not saved[1]))
    # The background consolidation off: it folds repeated turns every ten minutes, so a pass after it would search
    # another index than the pass before. Long turns: near-duplicate merging off, as in
    # benchmarks/quality/long_turns.py (the filler makes them alike).
    overrides: dict = {"advanced": {"consolidate_interval_s": 0}}
    if long:
        overrides["memory"] = {"audit_searches": False, "dedupe_cosine": 1.01}
    with tempfile.TemporaryDirectory(prefix="engram-roles-") as tmp, \
            EvalServer(Path(tmp) / "data", reranker=reranker, overrides=overrides) as server:
        tenants = [server.ingest(f"roles-{s['conv']}-{i}", s["inputs"]) for i, s in enumerate(specs)]
        with server.caches_off():
            try:
                for name, on, labelled in variants:
                    speakers.FIRST_PERSON, passages.UNIT_SPEAKER = on, labelled
                    top: dict[str, list[str]] = {}
                    block: dict[str, list[str]] = {}
                    items: dict[str, int] = {}
                    t0 = time.perf_counter()
                    for spec, tenant in zip(specs, tenants, strict=True):
                        top.update(server.search(tenant, spec["queries"], DEFAULTS, now_ms=spec["now_ms"],
                                                 top_k=10))
                        docs, _ = server.block_docs(tenant, spec["queries"], now_ms=spec["now_ms"])
                        block.update(docs)
                        items.update({q: len(d) for q, d in docs.items()})
                    rows: dict = {}
                    for h in ("dev", "held_out", "all"):
                        ids = [q for q in qrels if h == "all" or half[q] == h]
                        if not ids:
                            continue
                        rows[h] = category_rows(top, block, qrels, ids, category, items)
                    out["variants"][name] = {"rows": rows, "seconds": round(time.perf_counter() - t0, 1)}
                    log.info("%s: %s", name, {h: r["all"] for h, r in rows.items()})
            finally:
                speakers.FIRST_PERSON, passages.UNIT_SPEAKER = saved
    return out


def table(out: Mapping) -> str:
    lines = ["| variant | conversations | questions | R@10 | R@5 | block | "
             + " | ".join(f"cat {c} R@10 / block" for c in LOCOMO_CATEGORIES) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(LOCOMO_CATEGORIES)]
    for name, v in out["variants"].items():
        for h, r in v["rows"].items():
            a = r["all"]
            cats = " | ".join(f"{r[f'cat{c}']['recall@10']:.3f} / {r[f'cat{c}']['block_recall']:.3f}"
                              for c in LOCOMO_CATEGORIES)
            lines.append(f"| {name} | {h.replace('_', ' ')} | {a['queries']} | {a['recall@10']:.3f} | "
                         f"{a['recall@5']:.3f} | {a['block_recall']:.3f} | {cats} |")
    return "\n".join(lines)


def plot(out: Mapping, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(out["variants"])
    halves = [h for h in ("dev", "held_out") if h in out["variants"][names[0]]["rows"]]
    labels = [f"{h.replace('_', ' ')} {k}" for h in halves for k in ("R@10", "R@5", "block")]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        rows = out["variants"][name]["rows"]
        vals = [rows[h]["all"][k] for h in halves for k in ("recall@10", "recall@5", "block_recall")]
        ax.bar([x + i * width for x in range(len(labels))], vals, width, label=name)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(labels))], labels, fontsize=8)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("evidence recall")
    ax.set_title("LoCoMo as user / assistant, first-person questions (server defaults)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "held_out", "all"), default="all")
    parser.add_argument("--limit", type=int, default=0, help="at most N questions per tenant (a quick look)")
    parser.add_argument("--long", default="", help="B,A1,A2: evidence turns (and a third of the others) long")
    parser.add_argument("--users", choices=("both", "one"), default="both")
    parser.add_argument("--conversations", default="", help="comma-separated conversation ids (default: the split's)")
    parser.add_argument("--reranker", default="", help="a cross-encoder folder (default: the bundled one)")
    parser.add_argument("--default-only", action="store_true", help="the first-person rule on only (no rule-off pass)")
    parser.add_argument("--unit-speaker", action="store_true",
                        help="a pass with a long turn's sentence units read the other way (passages.UNIT_SPEAKER)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default benchmarks/results/quality/roles.json)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from benchmarks.ingest.run import cpu_model

    t0 = time.time()
    long = tuple(int(x) for x in args.long.split(",")) if args.long else None
    out = run(args.split, args.limit, long=long, users=args.users,  # type: ignore[arg-type]
              only=frozenset(c for c in args.conversations.split(",") if c), reranker=args.reranker,
              rule_off=not args.default_only, unit_speaker=args.unit_speaker)
    out.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)), machine=cpu_model(),
               command="python -m benchmarks.quality.roles " + " ".join(argv if argv is not None else sys.argv[1:]),
               seconds=round(time.time() - t0, 1))
    path = args.out or repo_root() / "benchmarks" / "results" / "quality" / "roles.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    plot(out, path.with_suffix(".png"))
    print(table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
