"""The one contract that the embedder and the cross-encoder share.

A model is driven in three steps, so that a batch scheduler can split the work between threads:

1. ``tokenize(items)`` runs on a CPU thread and returns a :class:`TokenBatch` (unpadded token ids and
   their lengths; ``lengths`` is what a token budget is charged with);
2. ``forward(batch)`` pads, runs the network on the model's device and post-processes, returning a
   NumPy array in the order of ``items``;
3. ``embed`` / ``score`` are the convenience composition of the two.

Nothing here imports torch; implementations live in :mod:`models.embedder` and :mod:`models.reranker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

InputT_contra = TypeVar("InputT_contra", contravariant=True)

TextPair = tuple[str, str]
"""A (query, passage) pair for a cross-encoder."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded or does not fit the contract (missing files, bad device, bad head)."""


@dataclass(frozen=True)
class TokenBatch:
    """Tokenized inputs on the CPU, unpadded, in the caller's order.

    ``input_ids[i]`` and ``token_type_ids[i]`` are int64 arrays of the same length (special tokens
    included, already truncated to the model's ``max_length``).
    """

    input_ids: tuple[npt.NDArray[np.int64], ...]
    token_type_ids: tuple[npt.NDArray[np.int64], ...]
    lengths: npt.NDArray[np.int64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.input_ids) != len(self.token_type_ids):
            raise ValueError(
                f"input_ids has {len(self.input_ids)} items, token_type_ids {len(self.token_type_ids)}"
            )
        lengths = np.fromiter((ids.shape[0] for ids in self.input_ids), dtype=np.int64, count=len(self))
        lengths.setflags(write=False)
        object.__setattr__(self, "lengths", lengths)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def padded_tokens(self) -> int:
        """Cost of running the whole batch padded to its longest item (longest × count)."""
        return int(self.lengths.max()) * len(self) if len(self) else 0


class ModelRunner(Protocol[InputT_contra]):
    """What the embedder and the reranker have in common."""

    @property
    def name(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def max_length(self) -> int: ...

    def tokenize(self, items: Sequence[InputT_contra]) -> TokenBatch: ...

    def forward(self, batch: TokenBatch) -> npt.NDArray[np.float32]: ...

    def count_tokens(self, items: Sequence[InputT_contra]) -> list[int]: ...

    def warmup(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


@runtime_checkable
class Embedder(ModelRunner[str], Protocol):
    """Texts → L2-normalized float32 vectors of shape ``(n, dim)``.

    Texts are embedded as given. An asymmetric model (e5) expects the caller to prepend
    ``query_prefix`` to search queries and ``passage_prefix`` to stored texts; both are ``""`` for a
    symmetric model (MiniLM).
    """

    query_prefix: str
    passage_prefix: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class Reranker(ModelRunner[TextPair], Protocol):
    """(query, passage) pairs → float32 relevance logits of shape ``(n,)``; higher is more relevant."""

    def score(self, pairs: Sequence[TextPair]) -> npt.NDArray[np.float32]: ...
