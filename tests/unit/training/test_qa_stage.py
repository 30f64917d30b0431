"""training/qa_stage.py: the second stage's groups come from the dev conversations' questions alone, each evidence
turn a positive as the server reads it, the hard negatives other turns of the same conversation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from training.qa_stage import NEGATIVES, question_groups

_TURNS = [f"Ann and Bob talk about topic number {i}: pottery, hiking, books, puppies and gardens {i}." for i in range(24)]


class _Embedder:
    """Deterministic unit vectors from each text's hash (no model)."""

    passage_prefix = "passage: "
    query_prefix = "query: "

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=16)
                for t in texts]
        out = np.asarray(rows, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _write(root: Path) -> Path:
    samples = []
    for conv_id, secret in (("conv-dev", "dev question"), ("conv-held", "held-out question")):
        conversation: dict = {"speaker_a": "Ann", "speaker_b": "Bob",
                              "session_1_date_time": "1:56 pm on 3 May, 2023",
                              "session_1": [{"speaker": ("Ann", "Bob")[i % 2], "dia_id": f"D1:{i + 1}", "text": t}
                                            for i, t in enumerate(_TURNS)]}
        samples.append({"sample_id": conv_id, "conversation": conversation,
                        "qa": [{"question": f"What {secret} did Ann ask about topic 3?", "answer": "x",
                                "evidence": ["D1:4", "D1:5"], "category": 4}]})
    (root / "locomo").mkdir(parents=True)
    (root / "locomo" / "locomo_dev5.json").write_text(json.dumps(samples), encoding="utf-8")
    return root


def test_groups_are_the_dev_questions_with_each_evidence_turn_as_served_first(tmp_path: Path) -> None:
    groups, asked = question_groups(_Embedder(), conversations=("conv-dev",), root=_write(tmp_path / "data"))
    assert asked == 1 and len(groups) == 2   # one group per evidence turn
    assert {g.query for g in groups} == {"What dev question did Ann ask about topic 3?"}
    positives = {g.passages[0] for g in groups}
    assert all(p.startswith("[3 May 2023] ") for p in positives)   # the date header the server indexes
    assert {p.split("\n")[0].split("] ", 1)[1] for p in positives} == {f"Bob: {_TURNS[3]}", f"Ann: {_TURNS[4]}"}
    for g in groups:
        assert len(g.passages) == 1 + NEGATIVES
        negatives = [p.split("\n")[0] for p in g.passages[1:]]
        assert not any(_TURNS[3] in n or _TURNS[4] in n for n in negatives)   # no evidence among the negatives


def test_the_stage_trains_on_top_records_itself_and_refuses_to_run_twice(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from models.testing import build_tiny_cross_encoder
    from training import qa_stage
    from training.data import Group
    from training.train import PROVENANCE_FILE

    init = build_tiny_cross_encoder(tmp_path / "stage-one")
    (init / PROVENANCE_FILE).write_text(json.dumps({"name": "tiny", "provenance": "stage one text",
                                                    "data": {"groups": 3}}), encoding="utf-8")
    groups = [Group(query=f"what about topic {i}?", passages=tuple(f"turn {i}.{j}" for j in range(1 + NEGATIVES)))
              for i in range(6)]
    monkeypatch.setattr(qa_stage, "question_groups", lambda embedder, conversations: (groups[:4], 3))
    monkeypatch.setattr(qa_stage, "replay_groups", lambda cache: groups[4:])
    monkeypatch.setattr(qa_stage, "role_groups", lambda embedder, conversations: (groups[:1], 1))
    monkeypatch.setattr(qa_stage, "CONFIG", qa_stage.TrainConfig(epochs=1, lr=3e-5, head_lr=3e-5, threads=1,
                                                                 uniform_last_attention=False, groups_per_step=2))
    monkeypatch.setattr("server.app.load_embedder", lambda config, device: _Named())
    out = tmp_path / "out"
    report = qa_stage.run(qa_stage.parse(["--init", str(init), "--out", str(out), "--conversations", "conv-26"]))
    meta = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert meta["provenance"].startswith("stage one text; then trained further")
    assert meta["stages"][-1] == qa_stage.STAGE and meta["data"]["qa_stage"]["conversations"] == ["conv-26"]
    assert "held-out conversations" in meta["data"]["never_used"]
    assert report["data"]["question_groups"] == 4 and report["data"]["replayed_groups"] == 2
    assert report["data"]["role_groups"] == 1 and "asked in the first person" in meta["provenance"]   # ROLES
    assert (out / "training_log_qa_stage.json").is_file() and (out / "model.safetensors").is_file()
    with pytest.raises(SystemExit, match="already had"):
        qa_stage.run(qa_stage.parse(["--init", str(out)]))
    with pytest.raises(SystemExit, match="dev conversations"):
        qa_stage.run(qa_stage.parse(["--init", str(init), "--out", str(out), "--conversations", "conv-42"]))

    def no_embedder(config, device):  # type: ignore[no-untyped-def]
        raise AssertionError("a bad --own-sets must be refused before the embedder loads")

    monkeypatch.setattr("server.app.load_embedder", no_embedder)
    with pytest.raises(SystemExit, match="no own set"):
        qa_stage.run(qa_stage.parse(["--init", str(init), "--out", str(tmp_path / "x"), "--own-sets", "recency"]))
    # With an own set, the provenance says so and what was never read.
    monkeypatch.setattr("server.app.load_embedder", lambda config, device: _Named())
    monkeypatch.setattr(qa_stage, "own_groups", lambda embedder, sets: (groups[:1], 1))
    qa_stage.run(qa_stage.parse(["--init", str(init), "--out", str(tmp_path / "own"), "--conversations", "conv-26",
                                 "--own-sets", "updates"]))
    meta = json.loads((tmp_path / "own" / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert "dev half of engram's own updates set" in meta["provenance"]
    assert "held-out half of engram's own updates set" in meta["data"]["never_used"]
    assert meta["data"]["qa_stage"]["own_groups"] == 1


class _Named(_Embedder):
    name = "hashed"


def test_own_groups_are_the_dev_halfs_english_questions_with_the_same_users_memories() -> None:
    from benchmarks.quality.datasets import load_updates
    from training.qa_stage import OWN_REPEATS, own_groups

    data = load_updates()
    groups, asked = own_groups(_Embedder(), ("updates",))
    trained = {q.id for qs in data.queries.values() for q in qs if data.half[q.id] == "dev" and data.lang[q.id] == "en"}
    assert asked == len(trained) > 0 and len(groups) == OWN_REPEATS * asked   # one relevant memory a question
    by_id = {m.id: m for m in data.memories}
    text_of = {q.id: q.text for qs in data.queries.values() for q in qs}
    user_of = {q.id: u for u, qs in data.queries.items() for q in qs}

    def fits(qid: str, passages: tuple[str, ...]) -> bool:
        """Whether ``passages`` are question ``qid``'s relevant memory first, then others of the same user."""
        relevant = {by_id[r].content for r in data.qrels[qid]}
        others = {m.content for m in data.memories if m.user == user_of[qid]} - relevant
        return any(passages[0].endswith(c) for c in relevant) and all(any(p.endswith(c) for c in others)
                                                                       for p in passages[1:])

    for g in groups:
        assert len(g.passages) == 1 + NEGATIVES
        # The same question and the same memory texts recur across users: one trained question must fit.
        assert any(fits(qid, g.passages) for qid in trained if text_of[qid] == g.query), g
    with pytest.raises(SystemExit):
        own_groups(_Embedder(), ("recency",))


def test_role_groups_ask_the_user_in_the_first_person_over_turns_written_as_user_and_assistant(tmp_path: Path) -> None:
    from training.qa_stage import role_groups

    groups, asked = role_groups(_Embedder(), conversations=("conv-dev",), root=_write(tmp_path / "data"))
    # The question names Ann alone: asked once, by Ann as the user; Bob as the user is not asked it.
    assert asked == 1 and len(groups) == 2
    assert {g.query for g in groups} == {"What dev question did I ask about topic 3?"}
    positives = {g.passages[0].split("\n")[0] for g in groups}
    assert positives == {f"[3 May 2023] assistant: {_TURNS[3]}", f"[3 May 2023] user: {_TURNS[4]}"}
    for g in groups:
        assert len(g.passages) == 1 + NEGATIVES
        assert all("Ann:" not in p and "Bob:" not in p for p in g.passages)   # roles, never names, as speakers
        assert g.passages[0].split("\n")[1].startswith("context: ")   # the previous turn of the session
        assert not any(_TURNS[3] in p.split("\n")[0] or _TURNS[4] in p.split("\n")[0] for p in g.passages[1:])
