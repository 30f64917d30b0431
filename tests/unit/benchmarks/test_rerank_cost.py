"""The rerank-cost benchmark's pure parts: the pairs each timing cell draws, and how a variant's logits are
compared with the reference's on the pairs both reranked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.rerank_cost.quality import logit_agreement
from benchmarks.rerank_cost.timing import draw
from benchmarks.rerank_cost.variants import REFERENCE, pick


def test_a_cell_draws_its_shape_the_same_way_every_time() -> None:
    pool = ([f"q{i}" for i in range(5)], [f"p{i}" for i in range(50)])
    pairs = draw(pool, (8, 30), 3)
    assert len(pairs) == 240 and pairs == draw(pool, (8, 30), 3)
    assert [q for q, _ in pairs[::30]] == ["q3", "q4", "q0", "q1", "q2", "q3", "q4", "q0"]
    assert all(q == pairs[i - i % 30][0] for i, (q, _) in enumerate(pairs))   # one query per block of 30
    assert draw(pool, (1, 20), 4) != draw(pool, (1, 20), 5)


def _write(cache: Path, name: str, heads: dict) -> None:
    (cache / f"heads-{name}.json").write_text(json.dumps(heads))


def test_logit_agreement_on_the_pairs_both_reranked(tmp_path: Path) -> None:
    ref = {"a/q1": {"m1": 3.0, "m2": 1.0, "m3": -2.0}, "a/q2": {"m4": 0.5, "m5": 2.5}}
    _write(tmp_path, REFERENCE, ref)
    _write(tmp_path, "shifted", {k: {m: v + 1.0 for m, v in d.items()} for k, d in ref.items()})
    _write(tmp_path, "reversed", {"a/q1": {"m1": -3.0, "m2": -1.0, "m3": 2.0, "m9": 7.0}, "a/q3": {"m1": 1.0}})
    shifted = logit_agreement("shifted", tmp_path)
    assert shifted is not None and shifted["pairs"] == 5 and shifted["mean_abs_logit_diff"] == pytest.approx(1.0)
    assert shifted["mean_spearman_within_query"] == pytest.approx(1.0) and shifted["same_top1"] == 1.0
    reversed_ = logit_agreement("reversed", tmp_path)   # only q1 is shared, and only its three memories
    assert reversed_ is not None and reversed_["pairs"] == 3 and reversed_["queries"] == 1
    assert reversed_["mean_spearman_within_query"] == pytest.approx(-1.0) and reversed_["same_top1"] == 0.0
    assert logit_agreement(REFERENCE, tmp_path) is None and logit_agreement("absent", tmp_path) is None


def test_variant_names_are_checked() -> None:
    assert [v.name for v in pick("teacher-bf16,teacher-int8")] == ["teacher-bf16", "teacher-int8"]
    assert pick("teacher-int8")[0].overrides() == {"reranker": str(pick("teacher-int8")[0].path),
                                                   "rerank_dtype": "int8"}
    with pytest.raises(SystemExit):
        pick("teacher-int4")
