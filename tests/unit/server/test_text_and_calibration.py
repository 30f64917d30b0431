"""server.text (the one CJK check, the indexed text) and server.fusion.calibration."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

from server.fusion.calibration import BUNDLED_CALIBRATION, Logistic, fused_features, load_calibration
from server.text import has_cjk, indexed_text

MAY_8_2023 = int(datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp() * 1000)


@pytest.mark.parametrize(("text", "expected"), [
    ("plain english", False), ("我最近在学什么", True), ("カタカナ", True), ("ｶﾀｶﾅ half-width", True),
    ("한국어", True), ("\u1100\u1161 jamo", True), ("\U00020000 ext-b", True), ("café naïve", False),
])
def test_one_cjk_check_covers_every_script_the_lexical_index_routes(text: str, expected: bool) -> None:
    assert has_cjk(text) is expected


def test_indexed_text_heads_events_with_their_date_and_entities_and_ends_with_the_context() -> None:
    text = indexed_text("Caroline: I went to a support group.", dated=True, created_at_ms=MAY_8_2023,
                        entities=("lgbtq support group",), context="Melanie: How was your week?")
    assert text == ("[8 May 2023] (lgbtq support group) Caroline: I went to a support group.\n"
                    "context: Melanie: How was your week?")
    assert indexed_text("A fact.", dated=False, created_at_ms=MAY_8_2023) == "A fact."
    assert indexed_text("Alice likes tea", dated=False, created_at_ms=0, entities=("alice", "tea shop")) == \
        "(tea shop) Alice likes tea"                             # an entity the content names is not repeated


def test_logistic_is_a_probability_monotone_in_each_positive_coefficient() -> None:
    model = Logistic(features=("a", "b"), coef=(2.0, 1.0), intercept=-1.0)
    p = model({"a": np.array([0.0, 1.0, 2.0]), "b": np.zeros(3)})
    assert np.all((p > 0) & (p < 1)) and np.all(np.diff(p) > 0)
    assert p[0] == pytest.approx(1 / (1 + np.e))
    with pytest.raises(ValueError):
        Logistic(features=("a",), coef=(1.0, 2.0), intercept=0.0)


def test_fused_features_bound_a_missing_cosine_by_the_lists_last_and_scale_bm25_by_its_best() -> None:
    cols = fused_features(np.array([5, 7, 9]), np.array([1.0, 0.6, 0.3]),
                          dense_ids=np.array([7, 5]), dense_scores=np.array([0.8, 0.5]),
                          lexical_ids=np.array([9, 5]), lexical_scores=np.array([10.0, 4.0]))
    assert cols["dense"].tolist() == [0.5, 0.8, 0.5]       # 9 is not in the dense list: its last cosine
    assert cols["bm25"].tolist() == [0.4, 0.0, 1.0]
    assert cols["rrf"].tolist() == [1.0, 0.6, 0.3]


def test_the_bundled_calibration_loads_and_names_its_data(tmp_path) -> None:
    cal = load_calibration(BUNDLED_CALIBRATION)
    assert cal.fused.features == ("dense", "bm25", "rrf", "dense_gap") and cal.rerank.features[0] == "logit"
    assert cal.rerank.coef[0] > 0 and cal.fused.coef[0] > 0       # more evidence, more probability
    bad = tmp_path / "bad.json"
    fit = {"fused": {"features": ["x"], "coef": [1], "intercept": 0},
           "rerank": {"features": ["logit", "rrf"], "coef": [1, 1], "intercept": 0}}
    bad.write_text(json.dumps({"default": "m", "fits": {"m": fit}}))
    with pytest.raises(ValueError):                                # a feature the server does not compute
        load_calibration(bad)
    fit["fused"] = {"features": ["dense", "bm25", "rrf"], "coef": [1, 1, 1], "intercept": 0}
    bad.write_text(json.dumps({"default": "m", "fits": {"m": fit, "other": fit}}))
    assert load_calibration(bad, embedder="unknown").source.startswith("m:")     # the default fit
    assert load_calibration(bad, embedder="other").source.startswith("other:")
