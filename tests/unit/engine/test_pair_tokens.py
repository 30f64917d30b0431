"""The rerank-depth controller's price of a pair: its tokens as the cross-encoder reads it, counted from cached
per-text counts (server/engine/rerank.py PairScorer.pair_tokens), equal to the lengths tokenizing the pairs gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from models.reranker import HFCrossEncoder
from models.testing import build_tiny_cross_encoder
from server.engine.rerank import PairScorer


@pytest.fixture(scope="module")
def short_reranker(tmp_path_factory: pytest.TempPathFactory) -> HFCrossEncoder:
    """The tiny cross-encoder reading at most 24 tokens a pair, so long memories are truncated as a real one's are."""
    return HFCrossEncoder.load(build_tiny_cross_encoder(tmp_path_factory.mktemp("ce"), seed=0), device="cpu",
                               max_length=24)


def test_pair_tokens_are_the_lengths_the_cross_encoder_reads(short_reranker: HFCrossEncoder) -> None:
    pool = ThreadPoolExecutor(1)
    scorer = PairScorer(reranker=short_reranker, device_pool=pool, cpu_pool=pool)
    memories = ["ok", "the launch moved to March", "Caroline: " + "we talked about the support group " * 8, ""]
    pairs = [(q, m) for q in ("when", "when did the team decide about the launch date") for m in memories]
    expected = [int(n) for n in short_reranker.tokenize(pairs).lengths]
    assert scorer.pair_tokens(pairs) == expected
    assert max(expected) == 24 and min(expected) < 10, "both truncated and short pairs are covered"
    # Counted once per text: a second pricing reads the table (same answer), and a long memory costs more.
    assert scorer.pair_tokens(pairs) == expected
    assert len(scorer._text_tokens) == len(memories) + 2
    assert scorer.pair_tokens([("when", memories[2])])[0] > scorer.pair_tokens([("when", memories[0])])[0]
    assert scorer.pair_tokens([]) == []
    pool.shutdown()
