"""Time decay × importance re-weighting and per-query top-k: the NumPy reference.

Candidates of ``q`` queries are laid out back to back in 1-D arrays of length ``n``; query ``s`` owns
the segment ``offsets[s]:offsets[s + 1]`` (``offsets``: int64, length ``q + 1``, ``offsets[0] == 0``,
non-decreasing, ``offsets[q] == n``; empty segments are allowed).

Per candidate ``i``::

    age      = max(age_s[i], 0)                      (negative or NaN ages count as 0)
    decay    = floor + (1 - floor) * 2 ** -(age / half_life_s[i])
                                                     if half_life_s[i] > 0, finite, and not pinned[i]
             = 1                                     otherwise (0, inf or NaN half-life: never decays)
    floor    = decay_floor (a scalar, or decay_floor[i]; default 0: the plain half-life curve)
    recency  = (1 - a) + a * decay                   a = recency_weight (scalar or per candidate; default 1)
    base     = (1 - importance_weight) + importance_weight * importance[i]
    weight   = max(base, min(weight_cap[i], base + boost[i] * decay))
                                                     (the access boost, fading with recency; default none)
    final    = relevance[i] * recency * weight * factor[i]   (all in float32; factor default 1)

Per segment, the ``top_k`` largest ``final`` values, descending, ties broken by the lower candidate
index; short segments are padded with score ``-inf`` and index ``-1``. Indices are global (into the
``n`` candidates). NaN finals rank after every number.

:mod:`kernels.decay_cupy` has the same signature and semantics on a GPU; tests compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class DecayRanked:
    """Scores first, ids second (FAISS ``(D, I)`` order)."""

    scores: npt.NDArray[np.float32]  # (q, top_k), -inf padding
    indices: npt.NDArray[np.int64]  # (q, top_k), global candidate indices, -1 padding
    decay: npt.NDArray[np.float32]  # (n,)
    weight: npt.NDArray[np.float32]  # (n,)
    final: npt.NDArray[np.float32]  # (n,)
    recency: npt.NDArray[np.float32] | None = None  # (n,)


class DecayRanker(Protocol):
    """The signature that :func:`decay_rank` and ``kernels.decay_cupy.decay_rank`` share."""

    def __call__(
        self,
        relevance: Any,
        age_s: Any,
        half_life_s: Any,
        importance: Any,
        pinned: Any,
        offsets: Any,
        *,
        top_k: int,
        importance_weight: float,
        decay_floor: Any = 0.0,
        recency_weight: Any = 1.0,
        boost: Any = 0.0,
        weight_cap: Any = np.inf,
        factor: Any = 1.0,
    ) -> DecayRanked: ...


def per_candidate(value: Any, n: int, xp: Any = np, *, name: str, low: float = 0.0, high: float = 1.0) -> Any:
    """A per-candidate float32 array (length n) from a scalar or an array; checks [low, high]."""
    values = xp.asarray(value, dtype=xp.float32)
    if values.ndim == 0:
        values = xp.full(n, values, dtype=xp.float32)
    if values.shape != (n,):
        raise ValueError(f"{name} must be a scalar or of shape ({n},), got {values.shape}")
    if n and not bool(((values >= low) & (values <= high)).all()):
        raise ValueError(f"{name} must be in [{low:g}, {high:g}]")
    return xp.ascontiguousarray(values)


def decay_floors(decay_floor: Any, n: int, xp: Any = np) -> Any:
    """The per-candidate floor array (float32, length n) from a scalar or an array; checks [0, 1]."""
    return per_candidate(decay_floor, n, xp, name="decay_floor")


def ranking_inputs(n: int, xp: Any, *, decay_floor: Any, recency_weight: Any, boost: Any, weight_cap: Any,
                   factor: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The optional per-candidate inputs, checked: (floor, recency weight, boost, weight cap, factor)."""
    return (decay_floors(decay_floor, n, xp), per_candidate(recency_weight, n, xp, name="recency_weight"),
            per_candidate(boost, n, xp, name="boost", high=np.inf),
            per_candidate(weight_cap, n, xp, name="weight_cap", high=np.inf),
            per_candidate(factor, n, xp, name="factor", high=np.inf))


def validate_decay_inputs(
    arrays: dict[str, Any], offsets: npt.NDArray[np.int64], *, top_k: int, importance_weight: float
) -> int:
    """Check shapes and parameters (host-side, cheap); returns ``n``. Raises ``ValueError``."""
    shapes = {name: tuple(array.shape) for name, array in arrays.items()}
    first = next(iter(shapes.values()))
    if len(first) != 1 or any(shape != first for shape in shapes.values()):
        raise ValueError(f"per-candidate arrays must be 1-D of one length, got {shapes}")
    n = first[0]
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        raise ValueError(f"offsets must be 1-D with q + 1 >= 1 entries, got shape {offsets.shape}")
    if offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 0):
        raise ValueError(f"offsets must start at 0, not decrease and end at n={n}")
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ValueError(f"top_k must be a non-negative int, got {top_k!r}")
    if not 0.0 <= importance_weight <= 1.0:
        raise ValueError(f"importance_weight must be in [0, 1], got {importance_weight}")
    return int(n)


def host_offsets(offsets: Any) -> npt.NDArray[np.int64]:
    """Offsets as a host int64 array (they are small: q + 1 entries)."""
    get = getattr(offsets, "get", None)  # a CuPy array
    values = get() if callable(get) else offsets
    result = np.asarray(values)
    if result.size and not np.issubdtype(result.dtype, np.integer):
        raise ValueError(f"offsets must be integers, got {result.dtype}")
    return result.astype(np.int64, copy=False)


def descending_keys(final: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """uint32 keys whose ascending order is ``final`` descending; -0 ties +0, NaN ranks last.

    The same bit trick as the CUDA kernel, so both rank identically given identical finals.
    """
    canonical = np.where(final == 0, np.float32(0), final).astype(np.float32)
    bits = canonical.view(np.uint32)
    ascending = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    return np.where(np.isnan(canonical), np.uint32(0xFFFFFFFF), ~ascending).astype(np.uint32)


def decay_rank(
    relevance: npt.ArrayLike,
    age_s: npt.ArrayLike,
    half_life_s: npt.ArrayLike,
    importance: npt.ArrayLike,
    pinned: npt.ArrayLike,
    offsets: npt.ArrayLike,
    *,
    top_k: int,
    importance_weight: float,
    decay_floor: npt.ArrayLike = 0.0,
    recency_weight: npt.ArrayLike = 1.0,
    boost: npt.ArrayLike = 0.0,
    weight_cap: npt.ArrayLike = np.inf,
    factor: npt.ArrayLike = 1.0,
) -> DecayRanked:
    """NumPy reference; see the module docstring for the semantics."""
    rel = np.asarray(relevance, dtype=np.float32)
    age = np.asarray(age_s, dtype=np.float32)
    half_life = np.asarray(half_life_s, dtype=np.float32)
    imp = np.asarray(importance, dtype=np.float32)
    pin = np.asarray(pinned, dtype=np.bool_)
    segs = host_offsets(offsets)
    arrays = {"relevance": rel, "age_s": age, "half_life_s": half_life, "importance": imp, "pinned": pin}
    n = validate_decay_inputs(arrays, segs, top_k=top_k, importance_weight=importance_weight)

    floors, rw, boosts, caps, factors = ranking_inputs(n, np, decay_floor=decay_floor, recency_weight=recency_weight,
                                                       boost=boost, weight_cap=weight_cap, factor=factor)
    decays = np.ones(n, dtype=np.float32)
    decaying = (half_life > 0) & np.isfinite(half_life) & ~pin
    clipped_age = np.fmax(age[decaying], np.float32(0))  # fmax maps NaN to 0
    floors = floors[decaying]
    decays[decaying] = floors + (np.float32(1) - floors) * np.exp2(-(clipped_age / half_life[decaying]))
    iw = np.float32(importance_weight)
    base = (np.float32(1) - iw) + iw * imp
    weights = np.maximum(base, np.minimum(caps, base + boosts * decays))
    recency = (np.float32(1) - rw) + rw * decays
    finals = ((rel * recency) * weights) * factors

    q = segs.shape[0] - 1
    scores = np.full((q, top_k), -np.inf, dtype=np.float32)
    indices = np.full((q, top_k), -1, dtype=np.int64)
    # (descending-final key << 32 | position in segment) is unique, so no sort needs to be stable
    keys = descending_keys(finals).astype(np.uint64) << np.uint64(32)
    for s in range(q):
        start, stop = int(segs[s]), int(segs[s + 1])
        k = min(top_k, stop - start)
        if k == 0:
            continue
        segment_keys = keys[start:stop] | np.arange(stop - start, dtype=np.uint64)
        if k < stop - start:
            best = np.argpartition(segment_keys, k - 1)[:k]
            best = best[np.argsort(segment_keys[best])]
        else:
            best = np.argsort(segment_keys)
        indices[s, :k] = start + best
        scores[s, :k] = finals[start + best]
    return DecayRanked(
        scores=scores,
        indices=indices,
        decay=decays,
        weight=weights.astype(np.float32, copy=False),
        final=finals.astype(np.float32, copy=False),
        recency=recency.astype(np.float32, copy=False),
    )
