"""Chat turns' passage windows (server/engine/ingest.py EmbedStage.window_groups): an EPISODIC memory's text gets
narrow windows (``turn_tokens``) from half the model's window on, a ~1 KB turn the model reads whole included; every
other memory's text keeps exactly the windows it had before turns had their own (cut at the model's window, the
embedder's width, ``passages`` at most), so documents (SEMANTIC memories) are embedded as before."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from models.base import TokenBatch
from server.engine.ingest import EmbedStage, WriteTexts
from tests.unit.engine.test_embed_stage import _run
from tests.unit.engine.test_passage_windows import Counting, model

__all__ = ["model"]   # the fixture (a tiny encoder reading 32 tokens), used by name

LONG = " ".join(f"sentence {i} about the trip and the weather on the coast" for i in range(20))
MID = "the trip to the coast was lovely and the weather held all week long for the whole family"
SHORT = "the garden in spring"


def _tokens(model: Counting, text: str) -> int:
    return len(model._encode_full([text])[0])


def _forward(model: Counting, windows: list[np.ndarray]) -> np.ndarray:
    return model.forward(TokenBatch(input_ids=tuple(windows), token_type_ids=tuple(np.zeros_like(w) for w in windows)))


def test_the_texts_fit_the_cases(model: Counting) -> None:
    assert model.windows_from(12) == model.max_length // 2 == 16
    assert model.windows_from(0) == model.max_length + model.passage_min_rest   # wide windows: past the min rest
    assert _tokens(model, SHORT) <= 16 < _tokens(model, MID) <= model.max_length
    assert model.max_length + model.passage_min_rest < _tokens(model, LONG)


def test_other_memories_get_exactly_the_windows_they_had(model: Counting) -> None:
    texts = [MID, LONG, SHORT]
    with ThreadPoolExecutor(1) as pool:
        model.rows = 0
        (before,) = _run(EmbedStage(embedder=model, device_pool=pool, passages=3), [texts])   # no turn windows
        rows_before = model.rows
        model.rows = 0
        stage = EmbedStage(embedder=model, device_pool=pool, passages=3, turn_tokens=12, turn_passages=20)
        plain, marked = _run(stage, [texts, WriteTexts(texts)])   # a list, and a payload with no turns
    assert model.rows == 2 * rows_before == 2 * (3 + 3)           # the long text's three wide windows, twice
    for got in (plain, marked):
        assert [np.shape(v) for v in got] == [np.shape(v) for v in before] == [(model.dim,), (4, model.dim),
                                                                               (model.dim,)]
        for old, new in zip(before, got, strict=True):
            np.testing.assert_allclose(new, old, atol=1e-5)
    np.testing.assert_allclose(plain[1][1:], _forward(model, model.passage_windows([LONG], limit=3)[0]), atol=1e-5)


def test_a_chat_turn_gets_narrow_windows_even_when_the_model_reads_it_whole(model: Counting) -> None:
    texts = [MID, LONG, SHORT, LONG]
    with ThreadPoolExecutor(1) as pool:
        stage = EmbedStage(embedder=model, device_pool=pool, passages=3, turn_tokens=12, turn_passages=20)
        (got,) = _run(stage, [WriteTexts(texts, turns=frozenset({0, 1, 2}))])   # the last text: a document
    mid = model.passage_windows([MID], limit=20, width=12)[0]
    long = model.passage_windows([LONG], limit=20, width=12)[0]
    assert mid and all(len(w) == 12 for w in mid) and len(long) == 20 and all(len(w) == 12 for w in long)
    assert [np.shape(v) for v in got] == [(1 + len(mid), model.dim), (21, model.dim), (model.dim,), (4, model.dim)]
    np.testing.assert_allclose(got[0][0], model.embed([MID])[0], atol=1e-5)   # the main vector as before
    np.testing.assert_allclose(got[0][1:], _forward(model, mid), atol=1e-5)
    np.testing.assert_allclose(got[1][1:], _forward(model, long), atol=1e-5)
    np.testing.assert_allclose(got[3][1:], _forward(model, model.passage_windows([LONG], limit=3)[0]), atol=1e-5)


def test_turns_are_marked_per_entry_of_a_batch(model: Counting) -> None:
    with ThreadPoolExecutor(1) as pool:
        stage = EmbedStage(embedder=model, device_pool=pool, passages=3, turn_tokens=12, turn_passages=4)
        document, turn = _run(stage, [[MID, LONG], WriteTexts([MID, LONG], turns=frozenset({0, 1}))])
    assert [np.shape(v) for v in document] == [(model.dim,), (4, model.dim)]
    mid = len(model.passage_windows([MID], limit=4, width=12)[0])
    assert 1 <= mid and [np.shape(v) for v in turn] == [(1 + mid, model.dim), (5, model.dim)]   # four at most


def test_window_groups_follow_the_type_and_the_length(model: Counting) -> None:
    stage = EmbedStage(embedder=model, device_pool=ThreadPoolExecutor(1), passages=3, turn_tokens=12,
                       turn_passages=20)
    lengths = [32, 20, 16, 32, 17]   # rows cut at the model's 32 tokens
    assert stage.window_groups(lengths, frozenset()) == [([0, 3], None, 3)]
    assert stage.window_groups(lengths, frozenset({1, 2, 3, 4})) == [([0], None, 3), ([1, 3, 4], 12, 20)]
    stage.turn_passages = 0   # a turn gets none
    assert stage.window_groups(lengths, frozenset({1, 2, 3, 4})) == [([0], None, 3)]
    stage.turn_tokens, stage.turn_passages = 0, 20   # off: a turn is as any other memory
    assert stage.window_groups(lengths, frozenset({1, 2, 3, 4})) == [([0, 3], None, 3)]
    stage.turn_tokens, stage.turn_passages = 24, 20   # wider than half the window: cut at the model's window
    assert stage.window_groups(lengths, frozenset({1, 3})) == [([0], None, 3), ([3], 24, 20)]
