"""Evaluation data for the quality benchmarks: one loader module, shared by every harness.

Three sets, all turned into the same `EvalSet` shape (documents, queries, graded qrels):

* BEIR SciFact, read from ``<repo>/../shared/data/scifact``;
* LoCoMo long conversations (one tenant per conversation, one memory per turn), from
  ``<repo>/../shared/data/locomo``;
* a Chinese/English agent-memory set written for this project, in ``benchmarks/quality/data``.

The metrics follow BEIR / pytrec_eval: nDCG@k with linear graded gains and a log2 discount, the
ideal ranking taken from the qrels; recall@k over documents with a grade above zero.

Nothing here runs at import time and nothing reads the environment: paths are arguments whose
default is found from this file's location.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DataMissing",
    "Doc",
    "Query",
    "EvalSet",
    "Turn",
    "LocomoQuestion",
    "EvidenceStats",
    "Conversation",
    "Memory",
    "ChineseSet",
    "repo_root",
    "default_data_dir",
    "load_scifact",
    "parse_locomo_datetime",
    "normalise_evidence",
    "load_locomo",
    "load_locomo_turns",
    "contextualise",
    "locomo_eval_set",
    "load_chinese",
    "ndcg_at_k",
    "recall_at_k",
    "evaluate",
]

LOCOMO_FILE = "locomo_dev5.json"
LOCOMO_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)  # 5 = adversarial: no answer in the conversation
ZH_MEMORIES_FILE = "zh_memories.jsonl"
ZH_QUERIES_FILE = "zh_queries.jsonl"


class DataMissing(FileNotFoundError):
    """An evaluation data set is not where it should be; harnesses skip with this message."""


# ---------------------------------------------------------------------------------------------
# Shared shapes


@dataclass(frozen=True)
class Doc:
    id: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str


@dataclass(frozen=True)
class EvalSet:
    """Documents, queries and graded judgments: qrels[query id][doc id] = grade (> 0 relevant)."""

    name: str
    docs: tuple[Doc, ...]
    queries: tuple[Query, ...]
    qrels: Mapping[str, Mapping[str, int]]


def repo_root() -> Path:
    """The repository root: this file is ``<root>/benchmarks/quality/datasets.py``."""
    return Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    """``../shared/data`` relative to the repository root."""
    return repo_root().parent / "shared" / "data"


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise DataMissing(
            f"{what} not found at {path}; the quality benchmarks read it from ../shared/data "
            "relative to the repository root (pass root= to read it elsewhere)"
        )
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------
# SciFact (BEIR)


def load_scifact(root: Path | None = None, split: Literal["test", "train"] = "test") -> EvalSet:
    """BEIR SciFact: doc text is ``title + " " + text``; only queries with judgments are kept."""
    if split not in ("test", "train"):
        raise ValueError(f"unknown SciFact split {split!r}; expected 'test' or 'train'")
    base = _require((root or default_data_dir()) / "scifact", "SciFact")
    corpus = _require(base / "corpus.jsonl", "SciFact corpus")
    queries_path = _require(base / f"queries_{split}.jsonl", f"SciFact {split} queries")
    qrels_path = _require(base / f"qrels_{split}.tsv", f"SciFact {split} qrels")

    docs = tuple(
        Doc(id=str(d["_id"]), text=f"{d.get('title', '')} {d.get('text', '')}".strip())
        for d in _read_jsonl(corpus)
    )
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = tuple(
        Query(id=str(q["_id"]), text=q["text"])
        for q in _read_jsonl(queries_path)
        if str(q["_id"]) in qrels
    )
    return EvalSet(name=f"scifact-{split}", docs=docs, queries=queries, qrels=qrels)


# ---------------------------------------------------------------------------------------------
# LoCoMo


@dataclass(frozen=True)
class Turn:
    id: str  # the dia_id, e.g. "D3:14"
    text: str
    speaker: str
    session: int
    created_at: int  # UTC unix seconds: the session's date and time
    image_caption: str | None = None  # the BLIP caption of a shared image, when there is one


@dataclass(frozen=True)
class LocomoQuestion:
    id: str  # "<sample_id>:q<index in the qa list>"
    text: str
    category: int
    answer: str
    evidence: tuple[str, ...]  # normalised dia_ids that exist in the conversation


@dataclass(frozen=True)
class EvidenceStats:
    """How the raw evidence lists were cleaned, for one conversation."""

    entries: int = 0  # raw evidence strings seen on kept-category questions
    malformed: int = 0  # strings that needed repair ("D8:6; D9:17", "D:11:26", spaces)
    unparseable: int = 0  # strings with no dia_id in them (dropped)
    dangling: int = 0  # well-formed dia_ids that name no turn (dropped)
    questions_without_evidence: int = 0  # kept-category questions dropped: nothing left


@dataclass(frozen=True)
class Conversation:
    id: str  # sample_id, e.g. "conv-26"; one tenant per conversation
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[LocomoQuestion, ...]
    now: int  # UTC unix seconds of the latest session that has turns
    evidence_stats: EvidenceStats


_MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(),
        start=1,
    )
}
_DATETIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def parse_locomo_datetime(value: str) -> int:
    """``"1:56 pm on 8 May, 2023"`` → UTC unix seconds (locale-independent)."""
    m = _DATETIME.match(value)
    if m is None or m.group(5).lower() not in _MONTHS:
        raise ValueError(f"unrecognised LoCoMo session time {value!r}")
    hour, minute = int(m.group(1)), int(m.group(2))
    if not (1 <= hour <= 12 and minute < 60):
        raise ValueError(f"unrecognised LoCoMo session time {value!r}")
    hour = hour % 12 + (12 if m.group(3).lower() == "p" else 0)
    when = datetime(int(m.group(6)), _MONTHS[m.group(5).lower()], int(m.group(4)), hour, minute, tzinfo=timezone.utc)
    return int(when.timestamp())


def normalise_evidence(raw: str) -> tuple[list[str], bool]:
    """Extract the dia_ids in one evidence string: ``("D8:6; D9:17")`` → ``(["D8:6", "D9:17"], True)``.

    The flag says whether the string was malformed (anything but exactly one clean ``D<n>:<m>``).
    """
    found = [f"D{s}:{t}" for s, t in _DIA_ID.findall(raw)]
    return found, found != [raw]


def load_locomo(
    root: Path | None = None, *, categories: Iterable[int] = LOCOMO_CATEGORIES
) -> list[Conversation]:
    """LoCoMo conversations; keeps questions in `categories` that still have evidence after cleaning."""
    keep = frozenset(categories)
    return [_conversation(sample, keep) for sample in _read_locomo(root)]


def load_locomo_turns(root: Path | None = None) -> dict[str, tuple[Turn, ...]]:
    """``{sample_id: turns}``: the conversation text alone (turns, speakers, session dates), for training
    data. The questions, answers, evidence and every other annotation of a sample are never accessed."""
    return {sample["sample_id"]: _turns(sample["conversation"])[0] for sample in _read_locomo(root)}


def _read_locomo(root: Path | None) -> list[dict[str, Any]]:
    path = _require((root or default_data_dir()) / "locomo" / LOCOMO_FILE, "LoCoMo")
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def _turns(conv: Mapping[str, Any]) -> tuple[tuple[Turn, ...], int]:
    """A conversation's turns in session order, and the time of its latest session that has turns."""
    sessions = sorted(
        int(k.split("_")[1]) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
    )
    turns: list[Turn] = []
    now = 0
    for n in sessions:
        at = parse_locomo_datetime(conv[f"session_{n}_date_time"])
        now = max(now, at)
        for t in conv[f"session_{n}"]:
            caption = t.get("blip_caption")
            turns.append(
                Turn(id=t["dia_id"], text=t["text"], speaker=t["speaker"], session=n, created_at=at,
                     image_caption=str(caption) if caption else None)
            )
    return tuple(turns), now


def _conversation(sample: Mapping[str, Any], keep: frozenset[int]) -> Conversation:
    conv = sample["conversation"]
    turns, now = _turns(conv)
    known = {t.id for t in turns}
    stats = {"entries": 0, "malformed": 0, "unparseable": 0, "dangling": 0, "questions_without_evidence": 0}
    questions: list[LocomoQuestion] = []
    for i, qa in enumerate(sample["qa"]):
        if qa["category"] not in keep:
            continue
        evidence: list[str] = []
        for entry in qa.get("evidence", []):
            stats["entries"] += 1
            ids, malformed = normalise_evidence(entry)
            stats["malformed"] += malformed
            stats["unparseable"] += not ids
            for dia in ids:
                if dia not in known:
                    stats["dangling"] += 1
                elif dia not in evidence:
                    evidence.append(dia)
        if not evidence:
            stats["questions_without_evidence"] += 1
            continue
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        questions.append(
            LocomoQuestion(id=f"{sample['sample_id']}:q{i}", text=qa["question"], category=int(qa["category"]),
                           answer=str(answer), evidence=tuple(evidence))
        )
    return Conversation(
        id=sample["sample_id"], speakers=(conv["speaker_a"], conv["speaker_b"]), turns=turns,
        questions=tuple(questions), now=now, evidence_stats=EvidenceStats(**stats),
    )


def contextualise(turn: Turn, *, with_caption: bool = False) -> str:
    """``"[8 May 2023] Caroline: text"``; optionally appends the shared image's caption."""
    when = datetime.fromtimestamp(turn.created_at, tz=timezone.utc)
    text = f"[{when.day} {when:%B} {when.year}] {turn.speaker}: {turn.text}"
    if with_caption and turn.image_caption:
        text += f" [shares {turn.image_caption}]"
    return text


def locomo_eval_set(conversation: Conversation, *, contextualised: bool = False) -> EvalSet:
    """One conversation as an `EvalSet`: every evidence turn has grade 1."""
    docs = tuple(Doc(id=t.id, text=contextualise(t) if contextualised else t.text) for t in conversation.turns)
    queries = tuple(Query(id=q.id, text=q.text) for q in conversation.questions)
    qrels = {q.id: {dia: 1 for dia in q.evidence} for q in conversation.questions}
    return EvalSet(name=f"locomo-{conversation.id}", docs=docs, queries=queries, qrels=qrels)


# ---------------------------------------------------------------------------------------------
# Chinese / English agent-memory set (written for this project)


@dataclass(frozen=True)
class Memory:
    id: str
    content: str
    type: Literal["episodic", "semantic", "procedural"]
    importance: float
    pinned: bool
    entities: tuple[str, ...]
    created_at: str  # ISO date, e.g. "2026-03-18"
    lang: Literal["zh", "en"]
    key: str | None = None
    scope: str | None = None

    @property
    def created_at_unix(self) -> int:
        return int(datetime.fromisoformat(self.created_at).replace(tzinfo=timezone.utc).timestamp())


@dataclass(frozen=True)
class ChineseSet:
    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]
    qrels: Mapping[str, Mapping[str, int]]
    query_lang: Mapping[str, str]  # query id → "zh" | "en"

    def eval_set(self) -> EvalSet:
        docs = tuple(Doc(id=m.id, text=m.content) for m in self.memories)
        return EvalSet(name="zh-memory", docs=docs, queries=self.queries, qrels=self.qrels)


def load_chinese(root: Path | None = None) -> ChineseSet:
    """The agent-memory set under ``<repo>/benchmarks/quality/data``."""
    base = (root or repo_root()) / "benchmarks" / "quality" / "data"
    memories = tuple(
        Memory(
            id=m["id"], content=m["content"], type=m["type"], importance=float(m["importance"]),
            pinned=bool(m.get("pinned", False)), entities=tuple(m.get("entities", ())),
            created_at=m["created_at"], lang=m["lang"], key=m.get("key"), scope=m.get("scope"),
        )
        for m in _read_jsonl(_require(base / ZH_MEMORIES_FILE, "Chinese memory set"))
    )
    raw_queries = _read_jsonl(_require(base / ZH_QUERIES_FILE, "Chinese query set"))
    return ChineseSet(
        memories=memories,
        queries=tuple(Query(id=q["id"], text=q["query"]) for q in raw_queries),
        qrels={q["id"]: {k: int(v) for k, v in q["relevant"].items()} for q in raw_queries},
        query_lang={q["id"]: q["lang"] for q in raw_queries},
    )


@dataclass(frozen=True)
class RecencyMemory:
    id: str
    content: str
    type: str
    age_days: float
    importance: float


@dataclass(frozen=True)
class RecencySet:
    """engram's recency-sensitive set (written for this project): the same topic at different ages where
    the newer memory is the answer with no shared key, recent events vs old ones, importance-driven picks;
    English and Chinese, with distractors. ``stale``: the memories a query must rank below its answer."""

    memories: tuple[RecencyMemory, ...]
    queries: tuple[Query, ...]
    qrels: dict[str, dict[str, int]]
    stale: dict[str, tuple[str, ...]]
    lang: dict[str, str]
    kind: dict[str, str]


# The dev set (it chose the weights), the held-out one, and a second dev set written with other attributes (the
# keyless-update rules were chosen on both dev sets; the held-out set is run once after).
# recency_dev3 / recency_held2: updates worded apart from the question and from each other (the newer statement
# names the change in its own words: "We moved down to Brighton" after "I live in Leeds"), with "keep" questions
# whose newer memory names another attribute; written together, the second never tuned on.
RECENCY_SETS = ("recency", "recency_held", "recency_dev2", "recency_dev3", "recency_held2", "recency_held3")


def load_recency(root: Path | None = None, name: str = "recency") -> RecencySet:
    """A recency set: ``recency`` (dev: it chose the recency weight and the time-intent constants),
    ``recency_dev2`` and ``recency_dev3`` (dev), or ``recency_held`` and ``recency_held2`` (held out: written with
    other attributes and wording, never tuned on)."""
    if name not in RECENCY_SETS:
        raise ValueError(f"unknown recency set {name!r}; expected one of {RECENCY_SETS}")
    base = (root or repo_root()) / "benchmarks" / "quality" / "data"
    memories = tuple(RecencyMemory(id=m["id"], content=m["content"], type=m["type"], age_days=float(m["age_days"]),
                                   importance=float(m["importance"]))
                     for m in _read_jsonl(_require(base / f"{name}_memories.jsonl", f"{name} memory set")))
    raw = _read_jsonl(_require(base / f"{name}_queries.jsonl", f"{name} query set"))
    return RecencySet(memories=memories, queries=tuple(Query(id=q["id"], text=q["text"]) for q in raw),
                      qrels={q["id"]: {r: 1 for r in q["relevant"]} for q in raw},
                      stale={q["id"]: tuple(q["stale"]) for q in raw}, lang={q["id"]: q["lang"] for q in raw},
                      kind={q["id"]: q["kind"] for q in raw})


# ---------------------------------------------------------------------------------------------
# Metrics (BEIR / pytrec_eval definitions)


def _top_k(ranked_ids: Sequence[str], k: int) -> list[str]:
    """The first k distinct ids: a repeated id is counted once, at its best rank."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    seen: set[str] = set()
    top: list[str] = []
    for doc_id in ranked_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            top.append(doc_id)
            if len(top) == k:
                break
    return top


def ndcg_at_k(ranked_ids: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """nDCG@k: gain = grade, discount = log2(rank + 1); 0.0 when nothing is relevant."""
    dcg = sum(max(qrels.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(_top_k(ranked_ids, k)))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked_ids: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Share of the relevant (grade > 0) documents found in the top k; 0.0 when none is relevant."""
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_top_k(ranked_ids, k))) / len(relevant)


def evaluate(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    ks: Sequence[int] = (1, 5, 10, 100),
    query_ids: Iterable[str] | None = None,
) -> dict[str, float]:
    """Mean ``ndcg@k`` and ``recall@k`` over the judged queries (or `query_ids`).

    `run` maps a query id to its ranked doc ids. A judged query missing from the run scores 0
    (pytrec_eval would skip it instead; the two agree when the run answers every query).
    """
    ids = [q for q in (qrels if query_ids is None else query_ids) if any(g > 0 for g in qrels.get(q, {}).values())]
    out: dict[str, float] = {}
    for k in ks:
        for name, metric in (("ndcg", ndcg_at_k), ("recall", recall_at_k)):
            scores = [metric(run.get(q, ()), qrels[q], k) for q in ids]
            out[f"{name}@{k}"] = sum(scores) / len(scores) if scores else 0.0
    out["queries"] = float(len(ids))
    return out


@dataclass(frozen=True)
class UpdateMemory:
    id: str
    user: str
    content: str
    type: str
    age_days: float
    scope: str


@dataclass(frozen=True)
class UpdatesSet:
    """engram's knowledge-update set (benchmarks/quality/make_updates.py, written for this project): per user, the
    same attribute changed 1–4 times over weeks, asked "now", "before" and "at first"; English and Chinese, with
    distractors. Dev: odd user numbers; held out: even ones (``half``)."""

    memories: tuple[UpdateMemory, ...]
    queries: dict[str, tuple[Query, ...]]   # by user (one tenant each)
    qrels: dict[str, dict[str, int]]
    kind: dict[str, str]
    lang: dict[str, str]
    half: dict[str, str]


def load_updates(root: Path | None = None) -> UpdatesSet:
    base = (root or repo_root()) / "benchmarks" / "quality" / "data"
    memories = tuple(UpdateMemory(id=m["id"], user=m["user"], content=m["content"], type=m["type"],
                                  age_days=float(m["age_days"]), scope=m.get("scope", ""))
                     for m in _read_jsonl(_require(base / "updates_memories.jsonl", "knowledge-update memory set")))
    raw = _read_jsonl(_require(base / "updates_queries.jsonl", "knowledge-update query set"))
    queries: dict[str, list[Query]] = {}
    for q in raw:
        queries.setdefault(q["user"], []).append(Query(id=q["id"], text=q["text"]))
    return UpdatesSet(memories=memories, queries={u: tuple(qs) for u, qs in queries.items()},
                      qrels={q["id"]: {r: 1 for r in q["relevant"]} for q in raw}, kind={q["id"]: q["kind"] for q in raw},
                      lang={q["id"]: q["lang"] for q in raw}, half={q["id"]: q["half"] for q in raw})
