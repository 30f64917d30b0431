"""The LoCoMo dev conversations' misses, and variants of what follows the rerank, measured on one search pass.

    .venv/bin/python -m benchmarks.quality.block_dev dump       # one server, the dev conversations, one search pass
    .venv/bin/python -m benchmarks.quality.block_dev misses     # where each dev evidence turn ends, and why
    .venv/bin/python -m benchmarks.quality.block_dev variants   # recall@10 / block per category for each variant
    .venv/bin/python -m benchmarks.quality.block_dev windows    # fusion variants, each searched end to end (rerank too)
    .venv/bin/python -m benchmarks.quality.block_dev dense-alone   # the dense retriever alone, question as written / unnamed

Dev conversations only (``block.LOCOMO_DEV``): the held-out ones are reported by ``run --only block`` and never
read here. ``dump`` starts one in-process server at its defaults, writes each dev conversation as the block suite
does and searches every question once (top 10, "as of" a day after the conversation), keeping each question's
candidates as the pipeline holds them after the rerank and before the second hop (``DUMP``, outside the tree: it
holds LoCoMo's text). ``misses`` and ``variants`` write the conversations again (the same writes give the same doc
ids, checked) and run the rest of the pipeline on those candidates in process: the second hop, the ranking stage
(decay, importance, temporal, newest first) and the context block's size rule, exactly as the server does after the
rerank. A variant replaces one of those steps; the cross-encoder is not run again, so the figures of the defaults
equal the dump's own, and a variant's figures are what the server would return with it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import logging
import pickle
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks.quality import suites
from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import LOCOMO_CATEGORIES, Conversation, Query, load_locomo
from benchmarks.quality.harness import DEFAULTS, EvalServer
from server.domain import Hit, Timings
from server.engine.candidates import Candidates, SearchItem
from server.engine.context import block_hits, build_context_block

DUMP = Path(tempfile.gettempdir()) / "engram-block-dev.pkl"
TOP = 50   # ranks read by the failure analysis

log = logging.getLogger(__name__)


def _dev() -> list[Conversation]:
    return [c for c in load_locomo() if c.id in LOCOMO_DEV]


@contextmanager
def _served(tag: str) -> Iterator[tuple[EvalServer, dict]]:
    """A server with the dev conversations written: (server, {conversation id: (Ingested, doc id → dia ids)})."""
    with tempfile.TemporaryDirectory(prefix=f"engram-block-dev-{tag}-") as tmp, EvalServer(Path(tmp) / "data") as server:
        tenants = {}
        for conv in _dev():
            ing = server.ingest(f"dev-{conv.id}", suites.locomo_inputs(conv, "speaker"))
            shard = server._app.engine.registry.shard(ing.tenant)   # type: ignore[union-attr]
            tenants[conv.id] = (ing, {shard.store.get(m).doc_id: tuple(d) for m, d in ing.docs_of.items()})
        yield server, tenants


def _named(it: SearchItem, cand: Candidates) -> str:
    """The one speaker among the candidates' turns that the question names, else "" (server/engine/speakers.py)."""
    from server.engine.speakers import named_speaker, speakers_of
    by_doc = it.shard.store.by_doc
    return named_speaker(it.query.text, speakers_of([by_doc(int(d)) for d in cand.ids[:100].tolist()]))


def _speaker_head(reserve: int, head: int = 20) -> Callable:
    """Fusion, then the named speaker's best ``reserve`` turns outside the rerank head moved into its last places."""
    def patch(fuse: Callable) -> Callable:
        def run(it: SearchItem, *args, **kw) -> Candidates:   # type: ignore[no-untyped-def]
            cand = fuse(it, *args, **kw)
            name = _named(it, cand) if len(cand.ids) > head else ""
            if not name:
                return cand
            by_doc = it.shard.store.by_doc
            own = [i for i in range(head, min(len(cand.ids), 100))
                   if (m := by_doc(int(cand.ids[i]))) is not None and m.content.startswith(name + ":")][:reserve]
            keep_head = list(range(head - len(own)))
            rest = [i for i in range(len(cand.ids)) if i not in set(keep_head) | set(own)]
            order = np.asarray(keep_head + own + rest)
            return dataclasses.replace(cand, ids=cand.ids[order], rrf=cand.rrf[order], rrf_norm=cand.rrf_norm[order],
                                       relevance=cand.relevance[order], rerank=cand.rerank[order],
                                       features={k: v[order] for k, v in cand.features.items()})
        return run
    return patch


def _expanded(docs: int, terms: int) -> Callable:
    """Pseudo-relevance feedback on the BM25 side (RM3-like): the query plus the ``terms`` most frequent content words
    of its first ``docs`` fused candidates (not the speakers' names), searched again; that list replaces BM25's."""
    def patch(fuse: Callable) -> Callable:
        def run(it: SearchItem, dense, lexical, feedback=None) -> Candidates:  # type: ignore[no-untyped-def]
            cand = fuse(it, dense, lexical, feedback)
            if lexical is None or len(cand.ids) == 0:
                return cand
            by_doc = it.shard.store.by_doc
            asked = set(re.findall(r"[a-z]+", it.query.text.lower()))
            words: Counter = Counter()
            for d in cand.ids[:docs].tolist():
                if (m := by_doc(int(d))) is not None:
                    words.update(w for w in re.findall(r"[a-z]{3,}", m.content.split(": ", 1)[-1].lower())
                                 if w not in _STOP and w not in asked)
            extra = [w for w, _ in words.most_common(terms)]
            if not extra:
                return cand
            scores, ids = it.shard.lexical.search_many([it.query.text + " " + " ".join(extra)], len(lexical[1]))[0]
            return fuse(it, dense, (scores, ids), feedback)
        return run
    return patch


def unnamed(question: str, name: str, how: str = "they") -> str:
    """``question`` without the speaker ``name``: "What did Caroline research?" → "What did they research?" (``how``
    "they"; "Caroline's" → "their"), "What did research?" ("drop")."""
    text = re.sub(rf"(?<!\w){re.escape(name)}'s(?!\w)", "their" if how == "they" else "", question)
    text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "they" if how == "they" else "", text)
    return " ".join(text.split())


def _dense_text(how: str, *, own_turns: bool = False, depth: int = 0) -> Callable:
    """For a question that names one chat speaker, the dense list searched with the name taken out (:func:`unnamed`):
    the name says whose turns (the speaker rule's part), and in the embedding it pulls the turns that address that
    speaker. ``how`` "they" / "drop" replace the dense list; "both" adds the unnamed list as a third RRF input (the
    dense weight) beside the question's own; "asis" adds the question as written. ``own_turns``: the tenant's first
    ``depth`` dense hits kept to that speaker's turns, as deep as the dense list (what became the server's
    ``speakers.SPEAKER_LIST``: over the speaker's own turns the unnamed question's dense recall@10 of multi-hop
    evidence is 0.593 against 0.322 over every turn as written, ``dense-alone``)."""
    def patch(fuse: Callable) -> Callable:
        pipeline_embed: list[Callable] = []

        def run(it: SearchItem, dense, lexical, feedback=None) -> Candidates:  # type: ignore[no-untyped-def]
            cand = fuse(it, dense, lexical, feedback)
            name = _named(it, cand)
            if not name or dense is None:
                return cand
            text = it.query.text if how == "asis" else unnamed(it.query.text, name, "drop" if how == "drop" else "they")
            scores, ids = it.shard.dense.search(np.asarray(pipeline_embed[0]([text])), depth or len(dense[1]))
            scores, ids = scores[0], ids[0]
            if own_turns:
                by_doc = it.shard.store.by_doc
                keep = [i for i, d in enumerate(ids.tolist())
                        if d >= 0 and (m := by_doc(int(d))) is not None and m.content.startswith(name + ":")]
                scores, ids = scores[keep[:len(dense[1])]], ids[keep[:len(dense[1])]]
                if not len(ids):
                    return cand
            if how in ("both", "asis"):
                return fuse(it, dense, lexical, (scores, ids))
            return fuse(it, (scores, ids), lexical, feedback)

        run.pipeline_embed = pipeline_embed   # type: ignore[attr-defined]
        return run
    return patch


def _rerank_text(dense_how: str = "") -> Callable:
    """The cross-encoder reads the unnamed question (:func:`unnamed`) for a question that names one chat speaker;
    ``dense_how``: the dense list's variant too (:func:`_dense_text`), "" the defaults'. The speaker rule, after the
    rerank, still reads the question as written."""
    def patch(fuse: Callable) -> Callable:
        inner = _dense_text(dense_how)(fuse) if dense_how else fuse

        def run(it: SearchItem, *args, **kw) -> Candidates:  # type: ignore[no-untyped-def]
            return inner(it, *args, **kw)

        if dense_how:
            run.pipeline_embed = inner.pipeline_embed   # type: ignore[attr-defined]

        def rerank_patch(original: Callable) -> Callable:
            def pairs(items: Sequence[SearchItem], cands: list[Candidates]):  # type: ignore[no-untyped-def]
                found, owners = original(items, cands)
                names = {qi: _named(items[qi], cands[qi]) for qi in {qi for qi, _ in owners}}
                return [(unnamed(q, names[qi]) if names[qi] else q, d)
                        for (q, d), (qi, _) in zip(found, owners, strict=True)], owners
            return pairs

        run.rerank_patch = rerank_patch   # type: ignore[attr-defined]
        return run
    return patch


def dense_alone() -> dict:
    """The dense retriever alone (the server's embedder, cosine over every turn of each dev conversation) for the dev
    questions that name one speaker: evidence recall@5/10/20 over all turns and over that speaker's turns, with the
    question as written and unnamed (:func:`unnamed`). No server, no fusion, no rerank."""
    from server.app import load_embedder
    from server.config import load_config
    from server.engine.speakers import named_speaker

    emb = load_embedder(load_config(env={}), "cpu")
    qp, pp = getattr(emb, "query_prefix", ""), getattr(emb, "passage_prefix", "")
    sums: dict[str, list[float]] = defaultdict(list)
    for conv in _dev():
        vecs = emb.embed([pp + f"{t.speaker}: {t.text}" for t in conv.turns])
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        for q in conv.questions:
            name = named_speaker(q.text, list(conv.speakers))
            if not name:
                continue
            qv = emb.embed([qp + q.text, qp + unnamed(q.text, name)])
            qv /= np.linalg.norm(qv, axis=1, keepdims=True)
            ev = set(q.evidence)
            for form, v in (("as written", qv[0]), ("unnamed", qv[1])):
                order = np.argsort(-(vecs @ v))
                own = [i for i in order if conv.turns[i].speaker == name]
                for scope, ranked in (("all turns", order), ("the speaker's turns", own)):
                    for k in (5, 10, 20):
                        found = {conv.turns[i].id for i in ranked[:k]} & ev
                        sums[f"cat{q.category} | {scope} | {form} | recall@{k}"].append(len(found) / len(ev))
    return {key: {"questions": len(v), "recall": round(float(np.mean(v)), 3)} for key, v in sorted(sums.items())}


FUSE = {"speaker4": _speaker_head(4), "speaker8": _speaker_head(8), "speaker12": _speaker_head(12),
        "prf3x5": _expanded(3, 5), "prf5x10": _expanded(5, 10),
        "dense_unnamed": _dense_text("they"), "dense_drop": _dense_text("drop"), "dense_both": _dense_text("both"),
        "rerank_unnamed": _rerank_text(), "rerank_dense_unnamed": _rerank_text("they"),
        "speaker_dense_unnamed": _dense_text("both", own_turns=True, depth=400),
        "speaker_dense_asis": _dense_text("asis", own_turns=True, depth=400)}


def _search_dev(server: EvalServer, tenants: dict, fuse: str = "") -> dict:
    """Every dev question searched once (``fuse``: a fusion variant of ``FUSE`` patched in), its candidates as the
    pipeline holds them after the rerank and before the second hop: {question id: row, "docs:<conv>": doc ids}."""
    out: dict = {}
    pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]
    captured: dict[tuple[str, str], tuple] = {}
    expand, fused, listed = pipeline._expand_stage, pipeline._fuse, pipeline.speaker_list
    if fuse.startswith("speaker_dense"):   # the variant that became the server's list: measured without the server's
        pipeline.speaker_list = False
    if fuse:
        pipeline._fuse = FUSE[fuse](fused)
        if hasattr(pipeline._fuse, "pipeline_embed"):   # a variant that embeds a query of its own
            pipeline._fuse.pipeline_embed.append(pipeline._embed)
    pairs = pipeline._rerank_pairs
    if hasattr(pipeline._fuse, "rerank_patch"):   # a variant that changes what the cross-encoder reads
        pipeline._rerank_pairs = pipeline._fuse.rerank_patch(pairs)

    def capture(items: Sequence[SearchItem], cands: list[Candidates]) -> list[Candidates]:
        for it, cand in zip(items, cands, strict=True):
            captured[(it.shard.tenant_id, it.query.text)] = (copy.deepcopy(cand), it.query, it.now_ms)
        return expand(items, cands)

    pipeline._expand_stage = capture
    try:
        for conv in _dev():
            ing, docs = tenants[conv.id]
            queries = [Query(id=q.id, text=q.text) for q in conv.questions]
            server.search(ing, queries, DEFAULTS, now_ms=conv.now * 1000, top_k=10)
            for q in conv.questions:
                cand, query, now_ms = captured[(ing.tenant, q.text)]
                out[q.id] = {"conv": conv.id, "cand": cand, "query": query, "now_ms": now_ms}
            out[f"docs:{conv.id}"] = docs
    finally:
        pipeline._expand_stage, pipeline._fuse, pipeline._rerank_pairs = expand, fused, pairs
        pipeline.speaker_list = listed
    return out


def dump(fuse: str = "") -> None:
    with _served("dump") as (server, tenants):
        out = _search_dev(server, tenants, fuse)
    with _dump_path(fuse).open("wb") as f:
        pickle.dump(out, f)
    log.warning("dumped %d questions to %s", sum(":q" in k for k in out), DUMP)


def windows(fuses: Sequence[str]) -> dict[str, dict]:
    """Each fusion variant searched end to end in one server (the cross-encoder reads each variant's own window),
    then the rest of the pipeline at the defaults: recall@10, recall@5 and block recall per category (dev)."""
    evidence, cat, _ = _questions()
    out = {}
    with _served("windows") as (server, tenants):
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]
        for fuse in fuses:
            data = _search_dev(server, tenants, fuse)
            outcomes = {qid: serve(pipeline, it, cand, docs) for qid, it, cand, docs in _replay(data, server, tenants)}
            out[fuse or "defaults"] = _scores(outcomes, evidence, cat)
            log.warning("%-40s %s", fuse or "defaults", out[fuse or "defaults"])
    return out


@dataclasses.dataclass
class Ranked:
    """One question's outcome for one variant: eval docs of the top ``TOP`` hits (in order) and of the block."""

    hits: list[tuple[str, ...]]
    block: list[str]
    relevance: list[float]


Variant = Callable[[object, SearchItem, Candidates], Ranked]


def serve(pipeline, it: SearchItem, cand: Candidates, docs: Mapping[int, tuple[str, ...]], *,  # type: ignore[no-untyped-def]
          expand: Callable | None = None, rank: Callable | None = None,
          block: Callable[[Sequence[Hit]], Sequence[Hit]] | None = None) -> Ranked:
    """The pipeline after the rerank for one question: the second hop (``expand`` replaces it), the ranking stage
    to ``TOP`` hits (``rank`` replaces it) and the block (``block`` replaces the size rule), as the server runs them."""
    cand = copy.deepcopy(cand)
    cands = (expand or pipeline._expand_stage)([it], [cand])
    wide = dataclasses.replace(it, query=dataclasses.replace(it.query, top_k=TOP))
    hits = list((rank or pipeline.rank)([wide], cands, Timings(batch_size=1))[0].hits)
    top5 = hits[:5]
    chosen = (block or (lambda hs: block_hits(hs)))(top5)
    text = build_context_block(chosen, max_items=5)
    lines = [line for line in text.splitlines() if line.startswith("[")]
    held = [d for h in top5 if any(line.endswith(" " + " ".join(h.memory.content.split())) for line in lines)
            for d in docs[h.memory.doc_id]]
    return Ranked(hits=[docs[h.memory.doc_id] for h in hits], block=held,
                  relevance=[h.breakdown.relevance for h in hits])


def _replay(data: dict, server: EvalServer, tenants: dict) -> Iterator[tuple[str, SearchItem, Candidates, dict]]:
    registry = server._app.engine.registry   # type: ignore[union-attr]
    for conv_id, (ing, docs) in tenants.items():
        if docs != data[f"docs:{conv_id}"]:
            raise SystemExit(f"{conv_id}: the writes gave other doc ids than the dump's; dump again")
    for qid, row in data.items():
        if qid.startswith("docs:"):
            continue
        ing, docs = tenants[row["conv"]]
        it = SearchItem(shard=registry.shard(ing.tenant), query=row["query"], now_ms=row["now_ms"])
        yield qid, it, row["cand"], docs


def _scores(outcomes: Mapping[str, Ranked], evidence: Mapping[str, set[str]], cat: Mapping[str, int]) -> dict:
    def share(found: Sequence[str], q: str) -> float:
        return len(evidence[q] & set(found)) / len(evidence[q])

    rows = {}
    for c in (0, *LOCOMO_CATEGORIES):
        ids = [q for q in outcomes if c == 0 or cat[q] == c]
        r10 = np.mean([share([d for h in outcomes[q].hits[:10] for d in h], q) for q in ids])
        r5 = np.mean([share([d for h in outcomes[q].hits[:5] for d in h], q) for q in ids])
        blk = np.mean([share(outcomes[q].block, q) for q in ids])
        rows["all" if c == 0 else f"cat{c}"] = (round(float(r10), 4), round(float(r5), 4), round(float(blk), 4))
    return rows


def _questions() -> tuple[dict[str, set[str]], dict[str, int], dict[str, object]]:
    evidence, cat, question = {}, {}, {}
    for conv in _dev():
        for q in conv.questions:
            evidence[q.id], cat[q.id], question[q.id] = set(q.evidence), q.category, q
    return evidence, cat, question


def _dump_path(fuse: str) -> Path:
    return DUMP.with_name(DUMP.stem + (f"-{fuse}" if fuse else "") + DUMP.suffix)


def run_variants(variants: Mapping[str, dict], fuse: str = "") -> dict[str, dict]:
    """Each variant's recall@10, recall@5 and block recall, overall and per category (dev)."""
    with _dump_path(fuse).open("rb") as f:
        data = pickle.load(f)
    evidence, cat, _ = _questions()
    out = {}
    with _served("eval") as (server, tenants):
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]
        rows = list(_replay(data, server, tenants))
        it_cal[0], it_rank[0] = pipeline.calibration, pipeline.rank
        for name, kw in variants.items():
            saved = {a: getattr(pipeline, a) for a in kw.get("attrs", {})}
            for a, v in kw.get("attrs", {}).items():
                setattr(pipeline, a, v)
            try:
                outcomes = {qid: serve(pipeline, it, cand, docs, **{k: v for k, v in kw.items() if k != "attrs"})
                            for qid, it, cand, docs in rows}
            finally:
                for a, v in saved.items():
                    setattr(pipeline, a, v)
            out[name] = _scores(outcomes, evidence, cat)
            log.warning("%-40s %s", name, out[name])
    return out


# -- variants ---------------------------------------------------------------------------------------------------------
def _hop(seeds: int, radius: int, hop: float, *, names: int = 0) -> Callable:
    """The second hop with other constants: ``seeds`` most relevant candidates, ``radius`` turns each side, ``HOP``;
    ``names`` > 0: also the candidates sharing a rare capitalised name with one of the first ``names`` seeds."""
    from server.engine import expand as ex

    def run(items: Sequence[SearchItem], cands: list[Candidates]) -> list[Candidates]:
        out = []
        for it, cand in zip(items, cands, strict=True):
            pos = ex.seeds_of(cand, n=seeds)
            turns = ex.adjacent_turns(it.shard.store, cand.ids[pos].tolist(), radius=radius, window_ms=1800 * 1000)
            if names:
                turns += _name_hops(it, cand, pos[:names], {d for d, _ in turns})
            old = ex.HOP
            ex.HOP = hop
            try:
                out.append(ex.second_hop(cand, turns, pos, calibration=it_cal[0]))
            finally:
                ex.HOP = old
        return out
    return run


it_cal: list = [None]
it_rank: list = [None]   # the pipeline's ranking stage (run_variants)
SESSION_MS = 1800 * 1000   # turns this close in time: one session (LoCoMo: a session's turns share its time)


def _sessions(per: int, factor: float) -> Callable:
    """The ranking stage, then its hits re-picked greedily: a hit's final score × ``factor`` for each better hit past
    the first ``per`` of its session already picked (session diversity, for evidence spread over sessions)."""
    def rank(items, cands, timings):  # type: ignore[no-untyped-def]
        out = []
        for result in it_rank[0](items, cands, timings):
            left, picked = list(result.hits), []
            while left:
                def score(h: Hit) -> float:
                    same = sum(abs(h.memory.created_at_ms - p.memory.created_at_ms) <= SESSION_MS for p in picked)
                    return h.breakdown.final * factor ** max(0, same - per + 1)
                best = max(range(len(left)), key=lambda i: (score(left[i]), -i))
                picked.append(left.pop(best))
            out.append(dataclasses.replace(result, hits=tuple(picked)))
        return out
    return rank
_CAP = re.compile(r"\b[A-Z][a-z]{2,}\b")


def _name_hops(it: SearchItem, cand: Candidates, pos: np.ndarray, taken: set[int]) -> list[tuple[int, int]]:
    by_doc = it.shard.store.by_doc
    texts = {int(d): by_doc(int(d)).content for d in cand.ids.tolist() if by_doc(int(d)) is not None}
    df: Counter = Counter()
    for t in texts.values():
        df.update(set(_CAP.findall(t.split(": ", 1)[-1])))
    out = []
    for si, p in enumerate(pos.tolist()):
        seed = int(cand.ids[p])
        rare = {w for w in _CAP.findall(texts.get(seed, "").split(": ", 1)[-1]) if df[w] <= 4}
        if not rare:
            continue
        for d, t in texts.items():
            if d != seed and d not in taken and rare & set(_CAP.findall(t.split(": ", 1)[-1])):
                out.append((d, si))
                taken.add(d)
    return out


def _variants() -> dict[str, dict]:
    # The hop variants replace the whole step after the rerank: they run without the speaker rule.
    out: dict[str, dict] = {"defaults": {}, "hop off": {"attrs": {"expand_turns": 0}}}
    for seeds, radius, hop in ((3, 1, 0.2), (5, 1, 0.2), (2, 2, 0.2), (3, 2, 0.15), (5, 2, 0.1), (2, 1, 0.3)):
        out[f"hop seeds {seeds} radius {radius} x{hop}"] = {"expand": _hop(seeds, radius, hop)}
    for n in (1, 2):
        out[f"hop + names of top {n}"] = {"expand": _hop(2, 1, 0.2, names=n)}
    for f in (1.0, 1.2, 2.0):
        out[f"speaker x{f}"] = {"attrs": {"speaker_factor": f}}
    for per, factor in ((1, 0.8), (2, 0.8), (2, 0.5), (3, 0.7)):
        out[f"sessions: past {per} a session x{factor}"] = {"rank": _sessions(per, factor)}
    return out


# -- the failure analysis -------------------------------------------------------------------------------------------
_TURN = re.compile(r"D(\d+):(\d+)")


def _where(dia: str) -> tuple[int, int]:
    m = _TURN.fullmatch(dia)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def misses() -> None:
    """Every dev evidence turn by where it ends at the defaults, per category, and the why of each miss."""
    with DUMP.open("rb") as f:
        data = pickle.load(f)
    evidence, cat, question = _questions()
    turns = {(conv.id, t.id): t for conv in _dev() for t in conv.turns}
    table: dict[int, Counter] = defaultdict(Counter)
    why: dict[int, Counter] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    shown: dict[int, list[str]] = defaultdict(list)
    with _served("misses") as (server, tenants):
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]
        for qid, it, cand, docs in _replay(data, server, tenants):
            got = serve(pipeline, it, cand, docs)
            doc_of = {d: doc for doc, ds in docs.items() for d in ds}
            fused = {int(d): i + 1 for i, d in enumerate(cand.ids.tolist())}
            dense = {int(d): i + 1 for i, d in enumerate(cand.dense_ids.tolist())}
            lexical = {int(d): i + 1 for i, d in enumerate(cand.lexical_ids.tolist())}
            ranked = {d: i + 1 for i, h in enumerate(got.hits) for d in h}
            top_sessions = {_where(d)[0] for h in got.hits[:5] for d in h}
            top2 = [_where(d) for h in got.hits[:2] for d in h]
            q = question[qid]
            names = [s for s in {t.speaker for (cv, _), t in turns.items() if cv == data[qid]["conv"]}
                     if re.search(rf"\b{s}\b", q.text)]
            c = cat[qid]
            if c in (1, 3) and len(shown[c]) < 8 and not evidence[qid] <= set(got.block):
                shown[c].append(f"Q {q.text} -> {sorted(evidence[qid])}" + "".join(
                    f"\n      {i + 1}. {'*' if set(h) & evidence[qid] else ' '} {got.relevance[i]:.3f} "
                    f"{docs_h[0] if (docs_h := h) else ''} {turns[(data[qid]['conv'], h[0])].text[:90] if h else ''}"
                    f" [{turns[(data[qid]['conv'], h[0])].speaker if h else ''}]"
                    for i, h in enumerate(got.hits[:10])))
            for e in sorted(evidence[qid]):
                rank = ranked.get(e, 0)
                place = ("block" if e in got.block else "top 5, not in block" if 0 < rank <= 5 else
                         "6-10" if 0 < rank <= 10 else "11-20" if 0 < rank <= 20 else "21-50" if rank else "not in top 50")
                table[c][place] += 1
                if place == "block":
                    continue
                doc = doc_of.get(e)
                s, n = _where(e)
                reasons = []
                if doc is None or (doc not in dense and doc not in lexical):
                    reasons.append("in neither list (100 each)")
                elif fused.get(doc, 10**6) > pipeline.default_rerank_depth:
                    reasons.append("fused rank > rerank depth")
                else:
                    reasons.append("reranked low")
                if any(ts == s and abs(tn - n) <= 2 for ts, tn in top2):
                    reasons.append("within 2 turns of a top-2 hit")
                elif s in top_sessions:
                    reasons.append("same session as a top-5 hit")
                else:
                    reasons.append("another session than the top 5")
                t = turns.get((data[qid]["conv"], e))
                if t is not None and names and t.speaker not in names:
                    reasons.append("the other speaker's turn")
                if t is not None and not (set(re.findall(r"[a-z]+", q.text.lower())) - _STOP) & set(
                        re.findall(r"[a-z]+", t.text.lower())):
                    reasons.append("no content word shared")
                for r in reasons:
                    why[c][r] += 1
                if len(examples[f"cat{c}"]) < 12:
                    examples[f"cat{c}"].append(f"{q.text} | {e} rank {rank or '>50'} "
                                               f"(dense {dense.get(doc, '-')}, bm25 {lexical.get(doc, '-')}, "
                                               f"fused {fused.get(doc, '-')}) | {t.speaker if t else '?'}: "
                                               f"{(t.text if t else '')[:110]}")
    places = ("block", "top 5, not in block", "6-10", "11-20", "21-50", "not in top 50")
    print("| category | evidence | " + " | ".join(places) + " |")
    for c in LOCOMO_CATEGORIES:
        print(f"| {c} | {sum(table[c].values())} | " + " | ".join(str(table[c][p]) for p in places) + " |")
    for c in LOCOMO_CATEGORIES:
        print(f"cat {c} misses:", dict(why[c].most_common()))
    for c, blocks in shown.items():
        print(f"\ncat {c} top 10:")
        print("\n".join(blocks))
    for k, lines in examples.items():
        print(f"\n{k}:")
        for line in lines:
            print("  ", line)


_STOP = frozenset("a an and are as at be but by did do does for from had has have he her his how i if in is it its "
                  "of on or she that the their them they this to was what when where which who why will with would "
                  "you your".split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("dump", "misses", "variants", "windows", "dense-alone"))
    parser.add_argument("--out", type=Path, default=None, help="variants: write the figures (no text) as JSON here")
    parser.add_argument("--only", default="", help="variants: the variants whose name contains this (and defaults)")
    parser.add_argument("--fuse", default="", choices=("", *FUSE), help="a fusion variant (dump, variants)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "dump":
        dump(args.fuse)
    elif args.command == "misses":
        misses()
    elif args.command == "dense-alone":
        rows = dense_alone()
        for key, row in rows.items():
            log.warning("%-60s %s", key, row)
        if args.out is not None:
            args.out.write_text(json.dumps({"split": "dev", "conversations": list(LOCOMO_DEV), "rows": rows},
                                           indent=1) + "\n", encoding="utf-8")
    elif args.command == "windows":
        rows = windows(["", *(f for f in FUSE if args.only in f)])
        if args.out is not None:
            args.out.write_text(json.dumps({"split": "dev", "conversations": list(LOCOMO_DEV),
                                            "columns": ["recall@10", "recall@5", "block_recall"], "variants": rows},
                                           indent=1) + "\n", encoding="utf-8")
    else:
        chosen = {k: v for k, v in _variants().items() if k == "defaults" or args.only in k}
        rows = run_variants(chosen if not args.fuse else {"defaults": {}}, args.fuse)
        if args.out is not None:
            args.out.write_text(json.dumps({"split": "dev", "conversations": list(LOCOMO_DEV),
                                            "columns": ["recall@10", "recall@5", "block_recall"], "variants": rows},
                                           indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
