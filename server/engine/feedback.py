"""A second retrieval round for weak queries: pseudo-relevance feedback as one dense Rocchio step.

A query whose first round is weak (its best calibrated fused relevance below ``FEEDBACK_BELOW``)
moves its vector toward the mean of its top ``search.feedback_docs`` fused candidates,
``q' = normalise(q + FEEDBACK_WEIGHT × mean(d_1..d_m))``, and searches the dense index again; that third
list joins the first round's two in the same RRF (with the dense list's weight), so what the second round
finds can enter the rerank head. The calibration's features stay the first round's (the cosine to the
query as asked, the BM25 score), so relevance still means "answers the query". Pure functions; the search
pipeline runs them on its CPU pool.

Off by default (``feedback_docs`` 0): on the LoCoMo dev conversations, where multi-hop questions were the
hope, it lowered recall@10 (README "Ranking", the feedback rows).
"""

from __future__ import annotations

import numpy as np

# The server's rule when search.feedback_docs > 0 (a query's SearchQuery.feedback skips the rule): the round runs
# below FEEDBACK_BELOW and steps FEEDBACK_WEIGHT toward the feedback mean. Measured with them (and 3 docs) on
# LoCoMo dev: recall@10 0.744 against 0.747 without the round, so the round stays off (README "Ranking").
FEEDBACK_BELOW = 0.5
FEEDBACK_WEIGHT = 0.3



def is_weak(relevance: np.ndarray, *, below: float) -> bool:
    """Whether a first round found nothing it is confident of: no candidate at or above ``below``."""
    return len(relevance) > 0 and float(np.max(relevance)) < below


def rocchio(query: np.ndarray, feedback: np.ndarray, *, weight: float) -> np.ndarray:
    """``normalise(query + weight × mean(feedback rows))``, float32; the query itself when there is no feedback."""
    q = np.asarray(query, dtype=np.float64)
    if len(feedback) == 0 or weight == 0:
        return np.asarray(query, dtype=np.float32)
    moved = q + weight * np.asarray(feedback, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return (moved / norm if norm > 0 else q).astype(np.float32)
