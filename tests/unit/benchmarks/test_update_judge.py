"""The update judge's generated pairs (benchmarks/quality/update_judge.py): written apart from the recency sets, both
labels present, the same pairs every run; and the probe's measures (benchmarks/quality/link_probe.py)."""

from __future__ import annotations

import numpy as np

from benchmarks.quality.datasets import RECENCY_SETS, load_recency
from benchmarks.quality.link_probe import auc, recall_at_precision
from benchmarks.quality.update_judge import generate


def test_the_pairs_are_the_same_every_run_and_hold_both_labels() -> None:
    pairs = generate(500)
    assert pairs == generate(500) and len(pairs) == len(set(pairs)) == 500
    share = np.mean([c for _, _, c in pairs])
    assert 0.3 < share < 0.6
    assert all(a != b or c == 0 for a, b, c in pairs)


def test_no_generated_statement_is_a_recency_sets_memory() -> None:
    texts = {m.content.strip().lower() for name in RECENCY_SETS for m in load_recency(name=name).memories}
    generated = {t.strip().lower() for a, b, _ in generate(6400) for t in (a, b)}
    assert not generated & texts


def test_auc_and_recall_at_precision() -> None:
    label = np.array([True, True, False, False, False])
    assert auc(np.array([3.0, 2.0, 1.0, 0.0, -1.0]), label) == 1.0
    assert auc(np.array([0.0, -1.0, 1.0, 2.0, 3.0]), label) == 0.0
    assert recall_at_precision(np.array([3.0, 0.0, 2.0, 1.0, -1.0]), label) == 0.5   # 1 of 2 at precision 1
