"""Sentence embedder: any Hugging Face encoder, mean (or CLS) pooling, L2-normalized float32 vectors."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from models._hf import HFRunner, load_parts
from models.base import ModelLoadError
from models.unpadded import supports

logger = logging.getLogger(__name__)

Pooling = Literal["mean", "cls"]

PASSAGE_STRIDE = 0.5   # a passage window starts every half window: a sentence cut by one lies whole in the next
# How far a text must run past the model's window, as a share of the window, before it gets windows as wide as the
# model's: a window over the few tokens the main vector did not read re-embeds nearly all that it did (a ~1 KB text is
# ~30 tokens past 256). A quarter (64 of 256 tokens): SciFact train nDCG@10 within 0.0015 of none at 32, 64 and 128
# tokens (docs/concepts/retrieval.md "Passage vectors"); it leaves at most a fifth of a text to BM25 and the
# cross-encoder's window alone.
PASSAGE_MIN_REST = 0.25


class HFEmbedder(HFRunner[str]):
    """Implements :class:`models.base.Embedder`. Build with :meth:`load`."""

    kind = "embedder"
    query_prefix = ""
    """Prepended to search queries by the caller (asymmetric models such as e5: ``"query: "``)."""
    passage_prefix = ""
    """Prepended to stored texts (memories) by the caller (e5: ``"passage: "``)."""
    near_duplicate_cosine = 0.95
    update_link_cosine = 0.55   # server/engine/updates.py: a restated attribute links at or above it
    """The cosine above which two memories are near-duplicates for this model (``memory.dedupe_cosine`` = 0:
    this). MiniLM: 0.95; a model whose cosines crowd near 1 needs a higher one (e5: 0.985)."""

    def __init__(self, *, pooling: Pooling, passage_tokens: int = 0, **kwargs: Any) -> None:
        self.pooling: Pooling = pooling  # before the base class, whose load-time checks run this model
        self.passage_tokens = passage_tokens
        """Tokens of a passage window, special tokens and prefix included (0 or more than ``max_length``: the
        model's window, ``max_length``): :meth:`passage_windows`."""
        self._min_rest: int | None = None
        self.dim = int(kwargs["model"].config.hidden_size)
        super().__init__(**kwargs)

    @classmethod
    def load(
        cls,
        path_or_id: str | Path,
        *,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        max_length: int = 256,
        batch_size: int | None = None,
        pooling: Pooling | None = None,
        num_threads: int | None = None,
        name: str | None = None,
        provenance: str | None = None,
        trace: bool = False,
        unpad: bool = False,
        passage_tokens: int = 0,
    ) -> HFEmbedder:
        """Load tokenizer and ``AutoModel`` from a local folder (or a hub id where a network exists).

        ``dtype`` None → float32 on CPU, float16 on CUDA. ``pooling`` None → the folder's
        sentence-transformers ``1_Pooling/config.json`` when present, else mean. ``num_threads`` sets
        torch's process-wide CPU threads when given (None leaves them alone; see
        :mod:`models.threads`).
        """
        from transformers import AutoModel

        parts = load_parts(AutoModel, path_or_id, device=device, dtype=dtype, num_threads=num_threads, name=name,
                           provenance=provenance)
        return cls(
            tokenizer=parts.tokenizer,
            model=parts.model,
            origin=parts.origin,
            device=parts.device,
            dtype=parts.dtype,
            max_length=max_length,
            batch_size=batch_size,
            pooling=pooling or _pooling_from_folder(parts.origin.path),
            trace=trace,
            unpad=unpad,
            passage_tokens=passage_tokens,
        )

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), dim)`` float32, each row of unit L2 norm, in the order of ``texts``."""
        return self.forward(self.tokenize(texts))

    def _encode(self, items: Sequence[str]) -> Any:
        return self._tokenizer(
            list(items),
            truncation=True,
            max_length=self.max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=True,
        )

    def _encode_full(self, items: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, special tokens included, not truncated."""
        return list(self._tokenizer(list(items), truncation=False, padding=False, return_attention_mask=False,
                                    return_token_type_ids=False)["input_ids"])

    def passage_windows(self, texts: Sequence[str], *, limit: int, width: int | None = None,
                        first: bool = False) -> list[list[npt.NDArray[np.int64]]]:
        """For each text as it is embedded (prefix included), the token ids of up to ``limit`` further windows over
        the text; ``[]`` for a text of at most :meth:`windows_from` ``(width)`` tokens. Each window is a whole model
        input of ``width`` tokens (None: :attr:`passage_tokens`; 0: ``max_length``): the special tokens and the
        passage prefix around the rest of them of the text, one every half window (:func:`further_windows`). The
        write stage asks only for texts whose :meth:`tokenize` row is longer than that (server/engine/ingest.py).
        ``first``: the window at the body's start too, before the others (for a text whose main vector is not its
        own pass; :func:`further_windows`)."""
        width = self.passage_tokens if width is None else width
        if not texts or limit <= 0:
            return [[] for _ in texts]
        with self._tokenizer_lock:
            rows = self._encode_full(texts)
            prefix = self.passage_prefix.strip()
            head = self._encode_full([prefix])[0][1:-1] if prefix else []
        return [further_windows(np.asarray(row, dtype=np.int64), max_length=self.max_length,
                                keep=len(head) if row[1:1 + len(head)] == head else 0, limit=limit,
                                width=width, above=self.windows_from(width), first=first) for row in rows]

    def passage_spans(self, text: str, *, limit: int, width: int | None = None) -> list[tuple[int, int]]:
        """The character spans of ``text`` (as it is embedded, prefix included) that its :meth:`passage_windows`
        read, in their order: where in a long memory each passage vector lies (the search's cross-encoder reads the
        part of a long turn whose passage matched the query: server/engine/passages.py). ``[]`` for a text without
        windows, or where the tokenizer gives no offsets."""
        width = self.passage_tokens if width is None else width
        with self._tokenizer_lock:
            found = self._offsets(text)
            prefix = self.passage_prefix.strip()
            head = self._encode_full([prefix])[0][1:-1] if prefix else []
        if found is None:
            return []
        ids, offsets = found
        keep = len(head) if ids[1:1 + len(head)] == head else 0
        size, starts = window_layout(len(ids), max_length=self.max_length, keep=keep, limit=limit, width=width,
                                     above=self.windows_from(width))
        body = offsets[1 + keep:-1]
        spans = []
        for s in starts:
            chars = [span for span in body[s:s + size] if span[1] > span[0]]
            if chars:
                spans.append((chars[0][0], chars[-1][1]))
        return spans if len(spans) == len(starts) else []

    def _offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
        """``text``'s token ids as :meth:`_encode_full` gives them, each with its ``(start, end)`` in ``text``;
        None where the tokenizer cannot say."""
        try:
            encoded = self._tokenizer([text], truncation=False, padding=False, return_attention_mask=False,
                                      return_token_type_ids=False, return_offsets_mapping=True)
        except (NotImplementedError, TypeError, ValueError):
            return None
        return list(encoded["input_ids"][0]), [tuple(o) for o in encoded["offset_mapping"][0]]

    @property
    def passage_min_rest(self) -> int:
        """Tokens a text must run past ``max_length`` for windows as wide as the model's (:meth:`windows_from`):
        :data:`PASSAGE_MIN_REST` of the window unless set."""
        return int(self.max_length * PASSAGE_MIN_REST) if self._min_rest is None else self._min_rest

    @passage_min_rest.setter
    def passage_min_rest(self, tokens: int | None) -> None:
        self._min_rest = tokens

    @property
    def passage_from(self) -> int:
        """Tokens past which a text has passage windows of :attr:`passage_tokens` (:meth:`windows_from`)."""
        return self.windows_from(self.passage_tokens)

    def windows_from(self, width: int) -> int:
        """Tokens past which a text has passage windows ``width`` tokens wide (0: ``max_length``): ``max_length``,
        or half of it when the windows are at most that narrow — a text the model reads whole still dilutes one
        sentence in its mean when it is long; windows as wide as the model's from :attr:`passage_min_rest` tokens
        past ``max_length`` on (a ~1 KB text 30 tokens past it would get a second 256-token row for those 30). Pure."""
        narrow = 0 < width <= self.max_length // 2
        return self.max_length // 2 if narrow else self.max_length + self.passage_min_rest

    def _run(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = self._call(inputs).float()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    def _unpadded_supported(self) -> bool:
        return supports(self._model)

    def _run_packed(self, hidden: torch.Tensor, packed: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = hidden.float()
        if self.pooling == "cls":
            pooled = hidden[packed["starts"]]
        else:
            lengths = packed["lengths"]
            pooled = hidden.new_zeros(lengths.shape[0], hidden.shape[1]).index_add_(0, packed["seq_index"], hidden)
            pooled = pooled / lengths.unsqueeze(1).to(hidden.dtype)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    def _empty_output(self) -> npt.NDArray[np.float32]:
        return np.zeros((0, self.dim), dtype=np.float32)

    def _warmup_items(self) -> list[str]:
        long_text = " ".join(["memory"] * self.max_length)
        return ["warm up", long_text, *(["a short warm-up sentence"] * 2)]

    def _describe_extra(self) -> dict[str, Any]:
        return {"dim": self.dim, "pooling": self.pooling, "normalized": True, "query_prefix": self.query_prefix,
                "passage_prefix": self.passage_prefix}


def window_layout(length: int, *, max_length: int, keep: int, limit: int, width: int = 0, above: int | None = None,
                  first: bool = False) -> tuple[int, list[int]]:
    """``(W, starts)`` of the passage windows of a tokenized text of ``length`` ids (special tokens and ``keep``
    prefix tokens included), as :func:`further_windows` cuts them: each window holds the body tokens
    ``starts[j] : starts[j] + W``; ``(0, [])`` when the text has none. Pure."""
    if length <= (max_length if above is None else above) or limit <= 0:
        return 0, []
    width = (width if 0 < width <= max_length else max_length) - 2 - keep
    if width < 1:
        return 0, []
    rest = length - 2 - keep - width
    stride = max(1, int(width * PASSAGE_STRIDE))
    count = -(-rest // stride)
    if count > limit:
        stride = min(width, -(-rest // limit))
        count = min(limit, -(-rest // stride))
    return width, [0] * first + [min(j * stride, rest) for j in range(1, count + 1)]


def further_windows(ids: npt.NDArray[np.int64], *, max_length: int, keep: int, limit: int, width: int = 0,
                    above: int | None = None, first: bool = False) -> list[npt.NDArray[np.int64]]:
    """The passage windows of a tokenized text ``ids`` (``[first special, keep prefix tokens, body..., last
    special]``) longer than ``above`` tokens (None: the ``max_length`` a model reads; a shorter text has none): each
    is the first special, the prefix, ``W = width - 2 - keep`` body tokens and the last special (``width`` 0 or over
    ``max_length``: ``max_length``). Windows start every ``W * PASSAGE_STRIDE`` tokens from the first stride on (the
    main vector, what truncation embeds, reads ``body[:W]`` and more), the last one ending at the body's end. When
    more than ``limit`` would be needed, the stride grows (less overlap, up to none) so ``limit`` windows reach as
    far as they can; what lies past ``W * (1 + limit)`` tokens (and the main vector's) is not embedded. ``first``:
    the window at the body's start comes first as well (``limit`` counts the others). Pure."""
    width, starts = window_layout(len(ids), max_length=max_length, keep=keep, limit=limit, width=width, above=above,
                                  first=first)
    head, prefix, body, last = ids[:1], ids[1:1 + keep], ids[1 + keep:-1], ids[-1:]
    return [np.concatenate([head, prefix, body[s:s + width], last]) for s in starts]


def _pooling_from_folder(path: str) -> Pooling:
    config = Path(path) / "1_Pooling" / "config.json"
    if not config.is_file():
        return "mean"
    settings = json.loads(config.read_text(encoding="utf-8"))
    if settings.get("pooling_mode_mean_tokens"):
        return "mean"
    if settings.get("pooling_mode_cls_token"):
        return "cls"
    raise ModelLoadError(f"{config}: only mean or CLS pooling is supported, found {settings}")
