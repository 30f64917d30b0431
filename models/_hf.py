"""Shared machinery for Hugging Face transformer models behind the :mod:`models.base` contract.

Loading (device, dtype, threads, provenance), thread-safe tokenization, and the forward loop that
sorts items by length, runs padded micro-batches and restores the caller's order. The embedder and
the cross-encoder only supply the network call and the post-processing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from models.base import ModelLoadError, TokenBatch
from models.devices import quantize_int8, resolve_device, resolve_dtype
from models.unpadded import PACKED_INPUTS, UnpaddedBert, pack

logger = logging.getLogger(__name__)

# Rows a forward pass takes on a CUDA device when the loader is given none: micro-batches of 32 and 64 left an
# H200 waiting on launches and a sync each (benchmarks/gpu/run.sh: the forward pass of 128 short turns 1.6x faster
# in one pass than in two of 64; docs/benchmarks/gpu.md)
CUDA_MICRO_BATCH = 512

InputT = TypeVar("InputT")

PROVENANCE_FILE = "engram_provenance.json"
"""Optional file in a model folder: ``{"name": ..., "provenance": ..., "random_weights": bool}``."""

_SANE_MAX_LENGTH = 100_000  # tokenizers without a limit report int(1e30)


@dataclass(frozen=True)
class Origin:
    """Where a model came from, for ``describe()``."""

    name: str
    path: str
    provenance: str
    random_weights: bool


def resolve_origin(path_or_id: str | Path, *, name: str | None, provenance: str | None) -> Origin:
    local = Path(path_or_id).expanduser()
    if local.is_dir():
        resolved = local.resolve()
        meta: dict[str, Any] = {}
        meta_file = resolved / PROVENANCE_FILE
        if meta_file.is_file():
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        return Origin(
            name=name or str(meta.get("name") or resolved.name),
            path=str(resolved),
            provenance=provenance or str(meta.get("provenance") or f"local:{resolved}"),
            random_weights=bool(meta.get("random_weights", False)),
        )
    if isinstance(path_or_id, Path) or local.is_absolute() or str(path_or_id).startswith("."):
        raise ModelLoadError(f"model folder {str(path_or_id)!r} does not exist")
    hub_id = str(path_or_id)
    return Origin(
        name=name or hub_id,
        path=hub_id,
        provenance=provenance or f"hub:{hub_id}",
        random_weights=False,
    )


def load_pretrained(auto_cls: Any, origin: Origin, *, dtype: torch.dtype, device: torch.device) -> tuple[Any, Any]:
    """(tokenizer, model in eval mode on ``device``) through the transformers Auto* loaders."""
    from transformers import AutoTokenizer  # heavy import, kept out of module import time

    started = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(origin.path, use_fast=True)
        model = auto_cls.from_pretrained(origin.path, dtype=torch.float32 if dtype == torch.qint8 else dtype)
    except (OSError, ValueError) as exc:
        hint = "" if Path(origin.path).is_dir() else " (hub ids need a network; HF_HUB_OFFLINE may be set)"
        raise ModelLoadError(f"cannot load {origin.path!r}{hint}: {exc}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"{origin.path!r} has no fast (Rust) tokenizer; one is required")
    model.to(device)
    model.eval()
    if dtype == torch.qint8:
        model = quantize_int8(model)
    logger.info(
        "loaded %s (%s) on %s as %s in %.2fs [%s]",
        origin.name, type(model).__name__, device, dtype, time.perf_counter() - started, origin.provenance,
    )
    return tokenizer, model


@dataclass(frozen=True)
class Loaded:
    """What both model kinds' ``load`` need: tokenizer and model on their device, and where they came from."""

    tokenizer: Any
    model: Any
    origin: Origin
    device: torch.device
    dtype: torch.dtype


def load_parts(auto_cls: Any, path_or_id: str | Path, *, device: str, dtype: torch.dtype | str | None,
               num_threads: int | None, name: str | None, provenance: str | None) -> Loaded:
    """Threads (when asked), device, dtype, origin and the pretrained weights, for any Auto* class."""
    if num_threads is not None:
        from models.threads import set_cpu_threads

        set_cpu_threads(num_threads)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    origin = resolve_origin(path_or_id, name=name, provenance=provenance)
    tokenizer, model = load_pretrained(auto_cls, origin, dtype=torch_dtype, device=torch_device)
    return Loaded(tokenizer=tokenizer, model=model, origin=origin, device=torch_device, dtype=torch_dtype)


def effective_max_length(requested: int, tokenizer: Any, config: Any) -> int:
    """``requested`` tokens, capped at the model's limit: its tokenizer's ``model_max_length`` (engram's
    recipe saves the length it trained at there), else the position embeddings. 0 asks for the limit."""
    if requested < 2 and requested != 0:
        raise ModelLoadError(f"max_length must be 0 (the model's limit) or >= 2, got {requested}")
    limit = int(getattr(tokenizer, "model_max_length", _SANE_MAX_LENGTH) or _SANE_MAX_LENGTH)
    if limit >= _SANE_MAX_LENGTH:
        limit = int(getattr(config, "max_position_embeddings", requested or 512))
    if requested == 0:
        return limit
    if requested > limit:
        logger.warning("max_length %d exceeds the model's limit %d; using %d", requested, limit, limit)
        return limit
    return requested


class HFRunner(Generic[InputT]):
    """Tokenize / sorted micro-batched forward / warm-up for a transformers model.

    Subclasses implement :meth:`_encode` (tokenizer call), :meth:`_run` (padded tensors → float32
    tensor, one row per item), :meth:`_empty_output` and :meth:`_warmup_items`.
    """

    kind = "model"
    cpu_batch_size = 64   # rows a forward pass takes on a CPU when the loader is given none

    def __init__(
        self,
        *,
        tokenizer: Any,
        model: Any,
        origin: Origin,
        device: torch.device,
        dtype: torch.dtype,
        max_length: int,
        batch_size: int | None,
        trace: bool = False,
        unpad: bool = False,
    ) -> None:
        if batch_size is None:   # a GPU takes whole Writes and rerank lists in one pass; a CPU, cache-sized ones
            batch_size = CUDA_MICRO_BATCH if device.type == "cuda" else self.cpu_batch_size
        if batch_size < 1:
            raise ModelLoadError(f"batch_size must be >= 1, got {batch_size}")
        self._tokenizer = tokenizer
        self._model = model
        self._origin = origin
        self._torch_device = device
        self._dtype = dtype
        self._tokenizer_lock = threading.Lock()  # fast tokenizers raise "Already borrowed" when shared
        self._pad_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else 0
        self._uses_token_types = "token_type_ids" in tokenizer.model_input_names
        self.name = origin.name
        self.device = str(device)
        self.max_length = effective_max_length(max_length, tokenizer, model.config)
        self.batch_size = batch_size
        self._traced: Any = self._trace() if trace and device.type in ("cpu", "cuda") else None
        self._unpadded: Any = self._build_unpadded(trace=trace) if unpad and device.type == "cpu" else None

    # --- subclass hooks -------------------------------------------------------------------
    def _encode(self, items: Sequence[InputT]) -> Any:
        raise NotImplementedError

    def _run(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def _empty_output(self) -> npt.NDArray[np.float32]:
        raise NotImplementedError

    def _unpadded_supported(self) -> bool:
        """Whether this runner's network can run on packed tokens (see :mod:`models.unpadded`)."""
        return False

    def _run_packed(self, hidden: torch.Tensor, packed: dict[str, torch.Tensor]) -> torch.Tensor:
        """Packed last hidden states ``(tokens, hidden)`` → float32 tensor, one row per sequence."""
        raise NotImplementedError

    def _warmup_items(self) -> list[InputT]:
        raise NotImplementedError

    def _describe_extra(self) -> dict[str, Any]:
        return {}

    # --- contract -------------------------------------------------------------------------
    def tokenize(self, items: Sequence[InputT]) -> TokenBatch:
        if len(items) == 0:
            return TokenBatch(input_ids=(), token_type_ids=())
        with self._tokenizer_lock:
            encoded = self._encode(items)
        ids = tuple(np.asarray(row, dtype=np.int64) for row in encoded["input_ids"])
        types = tuple(np.asarray(row, dtype=np.int64) for row in encoded["token_type_ids"])
        return TokenBatch(input_ids=ids, token_type_ids=types)

    def count_tokens(self, items: Sequence[InputT]) -> list[int]:
        return [int(n) for n in self.tokenize(items).lengths]

    def forward(self, batch: TokenBatch) -> npt.NDArray[np.float32]:
        """Run ``batch`` longest-first in micro-batches of ``batch_size``; rows in the caller's order."""
        if len(batch) == 0:
            return self._empty_output()
        order = np.argsort(-batch.lengths, kind="stable")
        out: npt.NDArray[np.float32] | None = None
        with torch.inference_mode():
            for rows in _chunks(order, self.batch_size):
                result = self._run_rows(batch, rows).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(batch), *result.shape[1:]), dtype=np.float32)
                out[rows] = result
        assert out is not None
        return out

    def warmup(self) -> None:
        started = time.perf_counter()
        items = self._warmup_items()
        self.forward(self.tokenize(items))
        if self._torch_device.type == "cuda":
            torch.cuda.synchronize(self._torch_device)
        logger.info("warmed up %s on %s in %.2fs", self.name, self.device, time.perf_counter() - started)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self._origin.path,
            "device": self.device,
            "dtype": "int8" if self._dtype == torch.qint8 else str(self._dtype).removeprefix("torch."),
            "provenance": self._origin.provenance,
            "random_weights": self._origin.random_weights,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "architecture": type(self._model).__name__,
            "traced": self._traced is not None,
            "unpadded": self._unpadded is not None,
            **self._describe_extra(),
        }

    # --- helpers --------------------------------------------------------------------------
    def _run_rows(self, batch: TokenBatch, rows: npt.NDArray[np.intp]) -> torch.Tensor:
        if self._unpadded is None:
            return self._run(self._pad(batch, rows))
        packed = pack([batch.input_ids[i] for i in rows], [batch.token_type_ids[i] for i in rows], self._torch_device)
        hidden = self._unpadded(**{k: packed[k] for k in PACKED_INPUTS})
        return self._run_packed(hidden, packed)

    def _build_unpadded(self, *, trace: bool) -> Any:
        """The network's encoder on packed tokens (:mod:`models.unpadded`), traced when ``trace``;
        checked against the padded network on a mixed-length batch, else None (padded forward)."""
        import warnings

        if self._dtype == torch.qint8 or not self._unpadded_supported():
            return None
        items = self._warmup_items()
        check = self.tokenize(items)
        rows = np.arange(len(check))
        try:
            module: Any = UnpaddedBert(self._model.base_model).eval()
            with warnings.catch_warnings(), torch.inference_mode():
                warnings.simplefilter("ignore")
                if trace:
                    example = pack(list(check.input_ids[:2]), list(check.token_type_ids[:2]), self._torch_device)
                    module = torch.jit.freeze(torch.jit.trace(
                        module, example_kwarg_inputs={k: example[k] for k in PACKED_INPUTS}, strict=False))
                packed = pack(list(check.input_ids), list(check.token_type_ids), self._torch_device)
                got = self._run_packed(module(**{k: packed[k] for k in PACKED_INPUTS}), packed).float()
                expected = self._run(self._pad(check, rows)).float()
            if not self._close(expected, got):
                raise RuntimeError("the unpadded forward differs from the padded network")
        except Exception as exc:  # an optimisation: never fail a load over it
            logger.warning("unpadded forward of %s unavailable (%s); padding batches", self.name, exc)
            return None
        logger.info("%s runs unpadded (packed tokens)%s", self.name, " traced" if trace else "")
        return module

    def _call(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The network's first output (last hidden state, or logits) for padded inputs."""
        if self._traced is not None:
            return self._run_traced(self._traced, inputs)[0]
        return self._model(**inputs)[0]

    def _run_traced(self, traced: Any, inputs: dict[str, torch.Tensor]) -> Any:
        """One call of the frozen trace. On CUDA without TorchScript's profiling executor: it would fuse and compile
        kernels for each new batch shape (every new query length), a stall at first sight of each; the plain
        interpreter runs the frozen graph's operators from C++ all the same, without the GIL."""
        if self._torch_device.type == "cuda":
            with torch.jit.optimized_execution(False):
                return traced(**inputs)
        return traced(**inputs)

    def _trace(self) -> Any:
        """TorchScript trace + freeze of the network (CPU or CUDA): a forward becomes one C++ call that holds
        no GIL between operators (the eager HF forward runs Python between operators and waits for the
        GIL at each while the server's other threads run Python; on CUDA each operator is a kernel launch: on one
        H200 a Write's forward of 128 short texts inside an importing server took 49-53 ms eager, 27-38 ms traced,
        docs/benchmarks/gpu.md). Shapes stay dynamic. The example batch
        is padded, so the attention mask is part of the traced graph (HF's SDPA path skips it for an
        unpadded batch); the trace is checked against the eager network on a differently padded batch,
        and any failure falls back to eager. Serving 1x10k at 32 clients: batched 172 -> 225 QPS,
        unbatched 80 -> 104 QPS; 256-token documents embed at the same speed (72 ms each, one thread)."""
        import warnings

        items = self._warmup_items()
        example = self._pad(self.tokenize(items[:2]), np.arange(2))
        check = self._pad(self.tokenize(items[1:]), np.arange(len(items) - 1))
        config = self._model.config
        return_dict = config.return_dict
        # Tracing reads every attribute of the model, including the training-only loss_function
        # property, which logs a spurious "loss_type=None ... unrecognized" warning.
        hf_logger = logging.getLogger("transformers.modeling_utils")
        hf_level = hf_logger.level
        try:
            hf_logger.setLevel(logging.ERROR)
            config.return_dict = False
            with warnings.catch_warnings(), torch.inference_mode():
                warnings.simplefilter("ignore")
                traced = torch.jit.freeze(torch.jit.trace(self._model, example_kwarg_inputs=example, strict=False))
                expected, got = self._model(**check)[0], self._run_traced(traced, check)[0]
            if not self._close(expected, got):
                raise RuntimeError("traced output differs from the eager network")
        except Exception as exc:  # tracing is an optimisation: never fail a load over it
            logger.warning("TorchScript trace of %s failed (%s); running eager", self.name, exc)
            return None
        finally:
            config.return_dict = return_dict
            hf_logger.setLevel(hf_level)
        logger.info("traced %s with TorchScript", self.name)
        return traced

    def _close(self, expected: torch.Tensor, got: torch.Tensor) -> bool:
        """Whether a rewritten network (trace, packed tokens) reproduces the reference output. Half
        precision rounds differently when a fused graph reorders operators."""
        exact = self._dtype in (torch.float32, torch.qint8)
        atol, rtol = (1e-4, 1e-5) if exact else (3e-2, 2e-2)
        return expected.shape == got.shape and torch.allclose(expected.float(), got.float(), atol=atol, rtol=rtol)

    def _pad(self, batch: TokenBatch, rows: npt.NDArray[np.intp]) -> dict[str, torch.Tensor]:
        lengths = batch.lengths[rows]
        width = int(lengths.max())
        ids = np.full((rows.shape[0], width), self._pad_id, dtype=np.int64)
        types = np.zeros((rows.shape[0], width), dtype=np.int64)
        for r, i in enumerate(rows):
            n = int(lengths[r])
            ids[r, :n] = batch.input_ids[i]
            types[r, :n] = batch.token_type_ids[i]
        mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        inputs = {"input_ids": ids, "attention_mask": mask}
        if self._uses_token_types:
            inputs["token_type_ids"] = types
        return {k: torch.from_numpy(v).to(self._torch_device) for k, v in inputs.items()}


def _chunks(order: npt.NDArray[np.intp], size: int) -> Iterator[npt.NDArray[np.intp]]:
    for start in range(0, order.shape[0], size):
        yield order[start : start + size]
