"""Passage windows of long texts, cut from the tokenizer's ids, and the write stage that embeds them: a text cut at
the embedder's window gets its main vector (as before) and passage vectors; a text that fits costs no extra row."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from models.base import TokenBatch
from models.embedder import HFEmbedder, further_windows
from models.testing import build_tiny_encoder
from server.engine.ingest import EmbedStage
from server.text import indexed_text
from tests.unit.engine.test_embed_stage import _run


def test_windows_cover_the_rest_in_half_steps_and_the_last_ends_at_the_end() -> None:
    ids = np.array([101, 7, *range(1000, 1050), 102])         # special, 1 prefix token, 50 body tokens, special
    rows = further_windows(ids, max_length=12, keep=1, limit=20)   # 9 body tokens a window, stride 4
    bodies = [r[2:-1].tolist() for r in rows]
    assert all(r[0] == 101 and r[1] == 7 and r[-1] == 102 and len(r) == 12 for r in rows)
    assert [b[0] - 1000 for b in bodies] == [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 41]
    assert bodies[-1][-1] == 1049
    assert further_windows(ids[:12], max_length=12, keep=1, limit=20) == []   # fits: nothing more


def test_first_adds_the_window_at_the_body_start_before_the_others() -> None:
    ids = np.array([101, 7, *range(1000, 1050), 102])
    plain = further_windows(ids, max_length=12, keep=1, limit=20)
    rows = further_windows(ids, max_length=12, keep=1, limit=20, first=True)
    assert rows[0].tolist() == [101, 7, *range(1000, 1009), 102]      # the main vector's first window, whole
    assert [r.tolist() for r in rows[1:]] == [r.tolist() for r in plain]   # ``limit`` counts the others
    assert further_windows(ids[:12], max_length=12, keep=1, limit=20, first=True) == []   # fits: none at all


def test_a_cap_widens_the_stride_up_to_no_overlap_and_no_further() -> None:
    ids = np.array([101, *range(1000, 1100), 102])                # 100 body tokens, 10 a window
    rows = further_windows(ids, max_length=12, keep=0, limit=3)
    assert [r[1] - 1000 for r in rows] == [10, 20, 30]            # stride = window: no gap, the rest unread
    rows = further_windows(ids, max_length=12, keep=0, limit=6)
    assert [r[1] - 1000 for r in rows] == [10, 20, 30, 40, 50, 60]
    ids = np.array([101, *range(1000, 1029), 102])                # 29 body tokens: 4 windows at stride 5 ...
    rows = further_windows(ids, max_length=12, keep=0, limit=3)   # ... so 3 at stride 7, the last at the end
    assert [r[1] - 1000 for r in rows] == [7, 14, 19] and rows[-1][-2] == 1028


def test_narrow_windows_are_width_tokens_wide_and_span_the_whole_text() -> None:
    ids = np.array([101, 7, *range(1000, 1050), 102])           # special, 1 prefix token, 50 body tokens, special
    rows = further_windows(ids, max_length=12, keep=1, limit=30, width=8)   # 5 body tokens a window, stride 2
    assert all(len(r) == 8 and r[0] == 101 and r[1] == 7 and r[-1] == 102 for r in rows)
    assert [r[2] - 1000 for r in rows] == [*range(2, 46, 2), 45] and rows[-1][-2] == 1049
    capped = further_windows(ids, max_length=12, keep=1, limit=9, width=8)   # 9 windows: stride 5, no overlap
    assert [r[2] - 1000 for r in capped] == [5, 10, 15, 20, 25, 30, 35, 40, 45]
    wide = further_windows(ids, max_length=12, keep=1, limit=30)
    for width in (0, 12, 40):                                   # 0 or past the model's window: the model's window
        assert [r.tolist() for r in further_windows(ids, max_length=12, keep=1, limit=30, width=width)] == [
            r.tolist() for r in wide]
    assert further_windows(ids[:12], max_length=12, keep=1, limit=30, width=8) == []   # fits: nothing, narrow or not
    short = ids[:11]                                            # 8 body tokens: the model reads it whole
    assert [r[2] - 1000 for r in further_windows(short, max_length=12, keep=1, limit=30, width=8, above=6)] == [2, 3]
    assert further_windows(short, max_length=12, keep=1, limit=30, width=8, above=11) == []


class Counting(HFEmbedder):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows = 0

    def forward(self, batch: TokenBatch) -> Any:
        self.rows += len(batch)
        return super().forward(batch)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Counting:
    path = build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))
    loaded = HFEmbedder.load(path, dtype="float32", max_length=32)
    return Counting(tokenizer=loaded._tokenizer, model=loaded._model, origin=loaded._origin,
                    device=loaded._torch_device, dtype=loaded._dtype, max_length=32, batch_size=8,
                    pooling=loaded.pooling)


def test_stage_adds_passage_rows_to_long_texts_only(model: Counting) -> None:
    short = ["the garden in spring", "a walk by the river"]
    long = " ".join(f"sentence {i} about the trip and the weather on the coast" for i in range(20))
    with ThreadPoolExecutor(1) as pool:
        stage = EmbedStage(embedder=model, device_pool=pool, passages=3)
        model.rows = 0
        (plain,) = _run(stage, [short])
        assert isinstance(plain, np.ndarray) and plain.shape == (2, model.dim) and model.rows == 2
        model.rows = 0
        mixed, alone = _run(stage, [[short[0], long], [short[1]]])
    assert model.rows == 3 + 3                                    # three texts, three windows of the long one
    assert mixed[0].shape == (model.dim,) and mixed[1].shape == (4, model.dim) and alone[0].shape == (model.dim,)
    np.testing.assert_allclose(mixed[1][0], model.embed([long])[0], atol=1e-5)   # the main vector as before
    windows = model.passage_windows([long], limit=3)[0]
    np.testing.assert_allclose(mixed[1][1:], model.forward(TokenBatch(
        input_ids=tuple(windows), token_type_ids=tuple(np.zeros_like(w) for w in windows))), atol=1e-5)
    with ThreadPoolExecutor(1) as pool:
        (off,) = _run(EmbedStage(embedder=model, device_pool=pool, passages=0), [[long]])
    assert isinstance(off, np.ndarray) and off.shape == (1, model.dim)


def test_the_embedders_passage_tokens_set_its_windows_width(model: Counting) -> None:
    long = " ".join(f"sentence {i} about the trip and the weather on the coast" for i in range(20))
    wide = model.passage_windows([long], limit=20)[0]
    assert wide and all(len(w) == model.max_length for w in wide)
    model.passage_tokens = 12
    try:
        narrow = model.passage_windows([long], limit=20)[0]
        with ThreadPoolExecutor(1) as pool:
            (sets,) = _run(EmbedStage(embedder=model, device_pool=pool, passages=20), [[long]])
    finally:
        model.passage_tokens = 0
    assert model.passage_from == model.max_length + model.passage_min_rest   # 0: past the window, by enough
    model.passage_tokens = 16
    assert model.passage_from == model.max_length // 2             # narrow windows start at half the window
    model.passage_tokens = 0
    assert len(narrow) > len(wide) and all(len(w) == 12 for w in narrow)
    assert narrow[0][0] == wide[0][0] and narrow[0][-1] == wide[0][-1]   # the special tokens around each
    assert sets[0].shape == (1 + len(narrow), model.dim)
    np.testing.assert_allclose(sets[0][1:], model.forward(TokenBatch(
        input_ids=tuple(narrow), token_type_ids=tuple(np.zeros_like(w) for w in narrow))), atol=1e-5)


def test_windows_read_a_memorys_content_never_its_context(model: Counting) -> None:
    long = " ".join(f"sentence {i} about the trip and the weather on the coast" for i in range(20))
    short_after_long = indexed_text("Caroline: sounds lovely", dated=False, created_at_ms=0, context=long)
    long_with_context = indexed_text(long, dated=False, created_at_ms=0, context="Melanie: how was the trip?")
    with ThreadPoolExecutor(1) as pool:
        model.rows = 0
        (sets,) = _run(EmbedStage(embedder=model, device_pool=pool, passages=3), [[short_after_long, long_with_context]])
    assert sets[0].shape == (model.dim,)   # the short turn threaded to a long one: one vector
    assert model.rows == 2 + len(model.passage_windows([long], limit=3)[0])
    assert len(sets) == 2 and np.asarray(sets[1]).shape == (4, model.dim)


def _decoded_spans_match(embedder: Any, text: str, *, limit: int, width: int) -> list[tuple[int, int]]:
    """passage_spans of ``text`` against its passage_windows: one span a window, each holding the text that window's
    body tokens read (the window's tokens re-tokenized from the span, specials and prefix aside, are its body)."""
    spans = embedder.passage_spans(text, limit=limit, width=width)
    rows = embedder.passage_windows([text], limit=limit, width=width)[0]
    assert spans and len(spans) == len(rows)
    keep = len(embedder._encode_full([embedder.passage_prefix.strip()])[0][1:-1]) if embedder.passage_prefix else 0
    for (a, b), row in zip(spans, rows, strict=True):
        assert 0 <= a < b <= len(text)
        assert embedder._encode_full([text[a:b].strip()])[0][1:-1] == row[1 + keep:-1].tolist()
    return spans


def test_passage_spans_say_where_each_window_lies(model: Counting) -> None:
    long = " ".join(f"sentence {i} about the trip and the weather on the coast" for i in range(20))
    spans = _decoded_spans_match(model, long, limit=200, width=12)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans) and spans[-1][1] == len(long)   # the last: the end
    assert _decoded_spans_match(model, long, limit=3, width=12)   # a cap: fewer, wider-strided windows
    assert model.passage_spans("the garden in spring", limit=20, width=12) == []   # fits: no window, no span


def test_passage_spans_of_the_default_embedder_map_back_through_its_character_table() -> None:
    from models.multilingual import E5Embedder

    e5 = E5Embedder.load(dtype="float32")
    text = e5.passage_prefix + "[8 May 2023] assistant: " + " ".join(
        f"Sentence {i} is about the café in Zürich — ＦＵＬＬ width and ok." for i in range(40))
    spans = e5.passage_spans(text, limit=16, width=48)
    rows = e5.passage_windows([text], limit=16, width=48)[0]
    assert len(spans) == len(rows) == 16
    ids, offsets = e5._offsets(text)
    assert ids == e5._encode_full([text])[0]                       # the same ids the write stage cut windows from
    assert all(text[a:b] for a, b in offsets[1:-1])
    assert "Zürich" in text[spans[0][0]:spans[0][1]] or "café" in text[spans[0][0]:spans[0][1]]


def test_a_text_just_past_the_window_gets_wide_windows_only_from_the_min_rest_on(model: Counting) -> None:
    ids = model._encode_full(["one two three four five six seven eight nine ten " * 4])[0]
    past = len(ids) - model.max_length          # tokens the main vector does not read
    assert past > 4
    text = ["one two three four five six seven eight nine ten " * 4]
    saved = model.passage_min_rest
    try:
        model.passage_min_rest = 0
        assert model.passage_windows(text, limit=8)[0]                 # any token past the window: a window
        model.passage_min_rest = past
        assert model.passage_windows(text, limit=8)[0] == []           # not past it by more than the rest: none
        assert model.passage_from == model.max_length + past
        model.passage_min_rest = past - 1
        assert model.passage_windows(text, limit=8)[0]
        model.passage_tokens = 12                                       # narrow windows do not read the rest rule
        assert model.passage_from == model.max_length // 2
        with ThreadPoolExecutor(1) as pool:
            model.passage_tokens, model.passage_min_rest = 0, past
            model.rows = 0
            (sets,) = _run(EmbedStage(embedder=model, device_pool=pool, passages=8), [text])
        assert np.asarray(sets[0]).shape == (model.dim,) and model.rows == 1   # the main row alone
    finally:
        model.passage_min_rest, model.passage_tokens = None, 0
    assert model.passage_min_rest == saved == model.max_length // 4   # the default: a quarter of the window
