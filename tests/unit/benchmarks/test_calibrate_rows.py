"""The calibration fit's data: the held-out LoCoMo conversations stay out of the default fit."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.quality.block import LOCOMO_DEV, LOCOMO_HELD_OUT
from benchmarks.quality.calibrate import fit, load_rows, save_rows, select


def _rows(n: int, value: float) -> dict[str, np.ndarray]:
    return {"fx": np.full((n, 2), value), "fy": np.arange(n) % 2 * 1.0,
            "rx": np.full((n, 3), value), "ry": np.arange(n) % 2 * 1.0}


def _all_rows() -> dict[str, dict[str, np.ndarray]]:
    rows = {"scifact": _rows(6, 0.5)}
    for i, conv in enumerate(LOCOMO_DEV + LOCOMO_HELD_OUT):
        rows[f"locomo:{conv}"] = _rows(4 + i, float(i))
    return rows


def test_dev_fit_reads_no_held_out_row() -> None:
    rows = _all_rows()
    data = select(rows, LOCOMO_DEV)
    held_out_values = {float(i) for i, c in enumerate(LOCOMO_DEV + LOCOMO_HELD_OUT) if c in LOCOMO_HELD_OUT}
    assert set(data) == {"scifact", "locomo"}
    assert len(data["locomo"]["fy"]) == sum(len(rows[f"locomo:{c}"]["fy"]) for c in LOCOMO_DEV)
    assert not held_out_values & set(np.unique(data["locomo"]["fx"]).tolist())
    every = select(rows, LOCOMO_DEV + LOCOMO_HELD_OUT)
    assert len(every["locomo"]["rx"]) == sum(len(rows[f"locomo:{c}"]["ry"]) for c in LOCOMO_DEV + LOCOMO_HELD_OUT)


def test_missing_conversation_is_an_error() -> None:
    rows = _all_rows()
    del rows[f"locomo:{LOCOMO_DEV[0]}"]
    with pytest.raises(ValueError, match=LOCOMO_DEV[0]):
        select(rows, LOCOMO_DEV)


def test_rows_round_trip_and_fit_the_same(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    rows = {"scifact": {"fx": rng.normal(size=(40, 2)), "fy": (rng.random(40) < 0.3) * 1.0,
                        "rx": rng.normal(size=(20, 3)), "ry": (rng.random(20) < 0.3) * 1.0}}
    for conv in LOCOMO_DEV + LOCOMO_HELD_OUT:
        rows[f"locomo:{conv}"] = {"fx": rng.normal(size=(30, 2)), "fy": (rng.random(30) < 0.2) * 1.0,
                                  "rx": rng.normal(size=(10, 3)), "ry": (rng.random(10) < 0.2) * 1.0}
    save_rows(tmp_path / "rows.npz", rows)
    back = load_rows(tmp_path / "rows.npz")
    assert set(back) == set(rows)
    a = fit(select(rows, LOCOMO_DEV), "fx", "fy")
    b = fit(select(back, LOCOMO_DEV), "fx", "fy")
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == b[1]
    c = fit(select(rows, LOCOMO_DEV + LOCOMO_HELD_OUT), "fx", "fy")
    assert not np.allclose(a[0], c[0])


def test_query_indices_stay_distinct_across_conversations() -> None:
    rows = _all_rows()
    for i, conv in enumerate(LOCOMO_DEV + LOCOMO_HELD_OUT):
        n = len(rows[f"locomo:{conv}"]["fy"])
        rows[f"locomo:{conv}"].update(fq=np.arange(n) // 2, rq=np.arange(n) // 2, rh=np.arange(n) % 2)
    data = select(rows, LOCOMO_DEV)
    sizes = [len(rows[f"locomo:{c}"]["fy"]) for c in LOCOMO_DEV]
    queries = sum((n + 1) // 2 for n in sizes)   # each conversation's indices 0 .. ceil(n / 2) - 1
    assert len(np.unique(data["locomo"]["fq"])) == len(np.unique(data["locomo"]["rq"])) == queries
    assert data["locomo"]["rh"].tolist() == [h for n in sizes for h in (np.arange(n) % 2).tolist()]


def test_cross_fit_specs_name_dev_conversations_and_folders(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.quality.calibrate import parse_cross_fit

    folds = parse_cross_fit([f"{LOCOMO_DEV[0]}={tmp_path}"])
    assert folds == {LOCOMO_DEV[0]: tmp_path}
    with pytest.raises(ValueError, match="not a dev conversation"):
        parse_cross_fit([f"{LOCOMO_HELD_OUT[0]}={tmp_path}"])
    with pytest.raises(ValueError, match="twice"):
        parse_cross_fit([f"{LOCOMO_DEV[0]}={tmp_path}", f"{LOCOMO_DEV[0]}={tmp_path}"])
    with pytest.raises(ValueError, match="no folder"):
        parse_cross_fit([f"{LOCOMO_DEV[0]}={tmp_path / 'missing'}"])
    with pytest.raises(ValueError, match="expected"):
        parse_cross_fit([LOCOMO_DEV[0]])


def test_cross_fitted_rows_replace_only_their_conversation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.quality.calibrate import cross_fitted

    rows = _all_rows()
    read: list[tuple[str, object]] = []

    def fold(conv: str, folder: object) -> dict[str, np.ndarray]:
        read.append((conv, folder))
        return _rows(3, -1.0)

    out = cross_fitted(rows, {LOCOMO_DEV[1]: tmp_path}, fold)
    assert read == [(LOCOMO_DEV[1], tmp_path)]
    assert np.all(out[f"locomo:{LOCOMO_DEV[1]}"]["rx"] == -1.0)
    assert np.all(rows[f"locomo:{LOCOMO_DEV[1]}"]["rx"] != -1.0)   # the input is not changed
    for name in rows:
        if name != f"locomo:{LOCOMO_DEV[1]}":
            np.testing.assert_array_equal(out[name]["rx"], rows[name]["rx"])
