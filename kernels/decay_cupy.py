"""CuPy twin of :func:`kernels.decay.decay_rank`: same signature, same semantics, NumPy results.

One RawKernel launch over all ``n`` candidates computes decay, weight and final score, and a 64-bit
sort key per candidate: ``segment << 32 | order-preserving-bits(-final)``. A single stable
``cupy.argsort`` of the keys groups candidates by segment, best first, ties by lower index (stable);
each segment's first ``top_k`` entries are then gathered in one vectorized step.

Import this module only where CuPy exists (``kernels.get_decay_ranker`` does that check).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import cupy  # type: ignore[import-not-found, import-untyped, unused-ignore]
import numpy as np

from kernels.decay import DecayRanked, host_offsets, ranking_inputs, validate_decay_inputs

logger = logging.getLogger(__name__)

_THREADS = 256

_SOURCE = r"""
extern "C" __global__ void decay_final(
    const float* __restrict__ relevance,
    const float* __restrict__ age_s,
    const float* __restrict__ half_life_s,
    const float* __restrict__ importance,
    const bool* __restrict__ pinned,
    const long long* __restrict__ offsets,
    const int q,
    const long long n,
    const float importance_weight,
    const float* __restrict__ decay_floor,
    const float* __restrict__ recency_weight,
    const float* __restrict__ boost,
    const float* __restrict__ weight_cap,
    const float* __restrict__ factor,
    float* __restrict__ decay,
    float* __restrict__ recency,
    float* __restrict__ weight,
    float* __restrict__ final_score,
    unsigned long long* __restrict__ key)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;

    const float hl = half_life_s[i];
    float d = 1.0f;
    if (!pinned[i] && hl > 0.0f && isfinite(hl)) {
        const float a = age_s[i];
        const float age = a > 0.0f ? a : 0.0f;  /* negative and NaN ages count as 0 */
        const float floor = decay_floor[i];
        d = __fadd_rn(floor, __fmul_rn(1.0f - floor, exp2f(-__fdiv_rn(age, hl))));
    }
    /* explicit rounding intrinsics: no FMA contraction, to match NumPy's float32 arithmetic */
    const float base = __fadd_rn(1.0f - importance_weight, __fmul_rn(importance_weight, importance[i]));
    const float w = fmaxf(base, fminf(weight_cap[i], __fadd_rn(base, __fmul_rn(boost[i], d))));
    const float rw = recency_weight[i];
    const float r = __fadd_rn(1.0f - rw, __fmul_rn(rw, d));
    float f = __fmul_rn(__fmul_rn(__fmul_rn(relevance[i], r), w), factor[i]);
    decay[i] = d;
    recency[i] = r;
    weight[i] = w;
    final_score[i] = f;

    /* segment s with offsets[s] <= i < offsets[s + 1]; the last such s skips empty segments */
    int lo = 0, hi = q;
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if (offsets[mid] <= i) lo = mid; else hi = mid;
    }
    if (f == 0.0f) f = 0.0f;  /* -0 ties with +0, as in NumPy */
    const unsigned int bits = __float_as_uint(f);
    const unsigned int ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    const unsigned int descending = isnan(f) ? 0xFFFFFFFFu : ~ascending;  /* NaN ranks last */
    key[i] = ((unsigned long long)lo << 32) | (unsigned long long)descending;
}
"""


def _segment_top_k(order: Any, offsets: Any, top_k: int) -> tuple[Any, Any]:
    """From a global order that keeps each segment in place, the first ``top_k`` of each segment.

    Returns ``(indices (q, top_k) with -1 padding, valid mask)``, both on the device.
    """
    positions = offsets[:-1, None] + cupy.arange(top_k, dtype=np.int64)[None, :]
    valid = positions < offsets[1:, None]
    if order.shape[0] == 0:
        return cupy.full(positions.shape, -1, dtype=np.int64), valid
    picked = order[cupy.minimum(positions, order.shape[0] - 1)]
    return cupy.where(valid, picked, -1).astype(np.int64), valid


@functools.cache
def _kernel() -> Any:
    return cupy.RawKernel(_SOURCE, "decay_final")


def decay_rank(
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
) -> DecayRanked:
    """GPU version of :func:`kernels.decay.decay_rank`; NumPy or CuPy inputs, NumPy outputs."""
    rel = cupy.ascontiguousarray(cupy.asarray(relevance, dtype=cupy.float32))
    age = cupy.ascontiguousarray(cupy.asarray(age_s, dtype=cupy.float32))
    half_life = cupy.ascontiguousarray(cupy.asarray(half_life_s, dtype=cupy.float32))
    imp = cupy.ascontiguousarray(cupy.asarray(importance, dtype=cupy.float32))
    pin = cupy.ascontiguousarray(cupy.asarray(pinned, dtype=cupy.bool_))
    segs_host = host_offsets(offsets)
    arrays = {"relevance": rel, "age_s": age, "half_life_s": half_life, "importance": imp, "pinned": pin}
    n = validate_decay_inputs(arrays, segs_host, top_k=top_k, importance_weight=importance_weight)
    floors, rw, boosts, caps, factors = ranking_inputs(n, cupy, decay_floor=decay_floor, recency_weight=recency_weight,
                                                       boost=boost, weight_cap=weight_cap, factor=factor)
    q = segs_host.shape[0] - 1
    if q >= 2**31:
        raise ValueError(f"too many segments for one launch: {q}")
    segs = cupy.asarray(segs_host)

    decay = cupy.empty(n, dtype=cupy.float32)
    recency = cupy.empty(n, dtype=cupy.float32)
    weight = cupy.empty(n, dtype=cupy.float32)
    final = cupy.empty(n, dtype=cupy.float32)
    key = cupy.empty(n, dtype=cupy.uint64)
    if n:
        blocks = (n + _THREADS - 1) // _THREADS
        _kernel()(
            (blocks,),
            (_THREADS,),
            (
                rel, age, half_life, imp, pin, segs,
                np.int32(q), np.int64(n), np.float32(importance_weight),
                floors, rw, boosts, caps, factors, decay, recency, weight, final, key,
            ),
        )
    order = cupy.argsort(key).astype(cupy.int64)  # stable: equal keys keep index order
    indices, valid = _segment_top_k(order, segs, int(top_k))
    gathered = final[cupy.maximum(indices, 0)] if n else cupy.zeros(indices.shape, dtype=cupy.float32)
    scores = cupy.where(valid, gathered, cupy.float32(-np.inf)).astype(cupy.float32)
    return DecayRanked(
        scores=cupy.asnumpy(scores),
        indices=cupy.asnumpy(indices),
        decay=cupy.asnumpy(decay),
        weight=cupy.asnumpy(weight),
        final=cupy.asnumpy(final),
        recency=cupy.asnumpy(recency),
    )
