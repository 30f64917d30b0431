"""benchmarks/quality/first_stage.py: evidence recall@k per split and category, as the retrievers alone are read."""

from __future__ import annotations

import pytest

from benchmarks.quality.datasets import LocomoQuestion
from benchmarks.quality.first_stage import KS, Recall


def test_recall_is_the_share_of_a_questions_evidence_in_its_top_k_averaged_per_question() -> None:
    recall = Recall()
    two = LocomoQuestion(id="c:q0", text="?", category=1, answer="", evidence=("D1:1", "D1:2"))
    one = LocomoQuestion(id="c:q1", text="?", category=4, answer="", evidence=("D2:1",))
    ranked = [f"D9:{i}" for i in range(60)]
    recall.add("v", "dev", two, ["D1:1", *ranked[:9], "D1:2"])   # one of two in the top 10, both in the top 20
    recall.add("v", "dev", one, [*ranked[:49], "D2:1"])          # 50th
    table = recall.table(["v"])["v"]
    assert table["dev"]["recall@5"] == pytest.approx(0.25)
    assert table["dev"]["recall@10"] == pytest.approx(0.25)
    assert table["dev"]["recall@20"] == pytest.approx(0.5)
    assert table["dev"]["recall@50"] == pytest.approx(1.0)
    assert table["dev"]["recall@10 by category"] == {1: 0.5, 4: 0.0}
    assert table["dev"]["questions"] == 2 and max(KS) == 50
