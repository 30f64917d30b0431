"""Offline fusion (benchmarks.quality.fusion) is the server's RRF over string ids."""

from __future__ import annotations

from benchmarks.quality.fusion import Setting, fuse, grid, settings_grid


def test_fuse_sums_weighted_reciprocal_ranks() -> None:
    dense = {"q": ["a", "b", "c"]}
    lexical = {"q": ["c", "b", "d"]}
    # k=1: a 1/2, b 1/3+1/3, c 1/4+1/2, d 1/4 → c (0.75), b (0.667), a (0.5), d (0.25)
    assert fuse(dense, lexical, Setting(k=1, dense_weight=1.0)) == {"q": ["c", "b", "a", "d"]}
    # Dense off: the lexical order alone.
    assert fuse(dense, lexical, Setting(k=1, dense_weight=0.0)) == {"q": ["c", "b", "d"]}


def test_dense_scale_applies_per_query() -> None:
    dense = {"zh": ["a", "b"], "en": ["a", "b"]}
    lexical = {"zh": ["b", "a"], "en": ["b", "a"]}
    out = fuse(dense, lexical, Setting(k=60, dense_weight=1.0, lexical_weight=0.9),
               dense_scale=lambda q: 0.1 if q == "zh" else 1.0)
    assert out["zh"][0] == "b" and out["en"][0] == "a"


def test_grid_ranks_settings_by_metric() -> None:
    dense = {"q": ["x", "y", "rel"]}
    lexical = {"q": ["rel"]}
    qrels = {"q": {"rel": 1}}
    # k=1, dense weight 3: x 1.5 > rel 0.75 + 0.5; dense weight 0.5: rel 0.125 + 0.5 > x 0.25.
    ranked = grid(dense, lexical, qrels, [Setting(k=1, dense_weight=3.0), Setting(k=1, dense_weight=0.5)])
    assert ranked[0][0].dense_weight == 0.5 and ranked[0][1] == 1.0
    assert ranked[1][1] < 1.0
    assert len(settings_grid(ks=(10, 60), dense_weights=(1.0,))) == 2
