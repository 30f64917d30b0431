"""The models on CUDA against their CPU twins: the project's trained cross-encoder (tracked in the repository) in
float16 ranks like float32 on the CPU, and an encoder's float16 vectors point where the CPU's float32 ones do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models._hf import CUDA_MICRO_BATCH
from models.testing import MINILM_L6_BERT, TRACKED_RERANKER, build_shaped_encoder

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

QUERIES = ["which laptop does Melanie use now", "what did Caroline paint last summer",
           "when is the marathon", "does the cat like the new food"]
PASSAGES = ["Melanie: I switched to a Framework laptop last week, the ThinkPad is gone.",
            "Caroline: I painted a lake at sunset in July, my favourite piece so far.",
            "Jon: the city marathon is on the 14th of October, I signed up yesterday.",
            "Gina: the cat finally eats the salmon food we bought on Monday.",
            "Melanie: my old laptop was a ThinkPad X1.",
            "Caroline: we went camping with the kids near the river."]


@pytest.mark.skipif(not (TRACKED_RERANKER / "model.safetensors").is_file(), reason="the trained cross-encoder")
def test_trained_cross_encoder_in_float16_ranks_like_float32_on_the_cpu() -> None:
    from models.reranker import HFCrossEncoder

    cpu = HFCrossEncoder.load(TRACKED_RERANKER, device="cpu", dtype="float32")
    gpu = HFCrossEncoder.load(TRACKED_RERANKER, device="cuda", dtype="float16")
    pairs = [(q, p) for q in QUERIES for p in PASSAGES]
    assert gpu.batch_size == CUDA_MICRO_BATCH and cpu.batch_size == 32
    want, got = cpu.score(pairs), gpu.score(pairs)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=0.05 * float(np.ptp(want)) + 1e-3)
    for i in range(len(QUERIES)):   # each query's best passage is the same one
        row = slice(i * len(PASSAGES), (i + 1) * len(PASSAGES))
        assert int(np.argmax(got[row])) == int(np.argmax(want[row]))


def test_encoder_on_cuda_points_where_the_cpu_twin_does(tmp_path: Path) -> None:
    from models.embedder import HFEmbedder

    path = build_shaped_encoder(tmp_path / "enc", MINILM_L6_BERT, name="engram-minilm-shaped-encoder")
    cpu = HFEmbedder.load(path, device="cpu", dtype="float32")
    gpu = HFEmbedder.load(path, device="cuda", dtype="float16")
    want, got = cpu.embed(QUERIES + PASSAGES), gpu.embed(QUERIES + PASSAGES)
    assert got.dtype == np.float32 and got.shape == want.shape
    cosine = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cosine.min() > 0.995, cosine


def test_traced_encoder_on_cuda_gives_the_eager_vectors_from_any_thread(tmp_path: Path) -> None:
    """The server loads its models traced (server.app CPU_SPEED): on CUDA too, a frozen TorchScript graph run
    without the profiling executor. Same vectors as the eager network, for texts of lengths it was not traced at,
    and from a thread that is not the loader's (the server's device thread)."""
    from concurrent.futures import ThreadPoolExecutor

    from models.embedder import HFEmbedder

    path = build_shaped_encoder(tmp_path / "enc", MINILM_L6_BERT, name="engram-minilm-shaped-encoder")
    eager = HFEmbedder.load(path, device="cuda", dtype="float16")
    traced = HFEmbedder.load(path, device="cuda", dtype="float16", trace=True)
    assert traced.describe()["traced"] and not eager.describe()["traced"]
    texts = QUERIES + PASSAGES + [" ".join(PASSAGES) * 3]   # the last one cut at the model's window
    want = eager.embed(texts)
    with ThreadPoolExecutor(1) as pool:
        got = pool.submit(traced.embed, texts).result()
    cosine = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cosine.min() > 0.999, cosine


def test_traced_cross_encoder_on_cuda_scores_like_eager(tmp_path: Path) -> None:
    from models.reranker import HFCrossEncoder
    from models.testing import build_minilm_shaped_cross_encoder

    path = build_minilm_shaped_cross_encoder(tmp_path / "ce")
    eager = HFCrossEncoder.load(path, device="cuda", dtype="float16")
    traced = HFCrossEncoder.load(path, device="cuda", dtype="float16", trace=True)
    assert traced.describe()["traced"]
    pairs = [(q, p) for q in QUERIES for p in PASSAGES]
    want, got = eager.score(pairs), traced.score(pairs)
    np.testing.assert_allclose(got, want, atol=0.02 * float(np.ptp(want)) + 1e-3)
