"""CJK query centring: a Chinese query searches the dense index without what every Chinese query shares.

multilingual-e5-small puts a Chinese query nearer to almost every Chinese memory than to any English one
(zh/en set: a Chinese query's mean cosine is 0.84 to the Chinese memories and 0.75 to the English ones), so an
English memory that answers a Chinese query ranks below most Chinese memories: the Chinese queries' misses on
that set are such answers, 40 of the 48 outside the dense top 100 of 194 memories. The shared part is the
language (and the "query: " form), not the meaning: with the mean embedding of Chinese queries subtracted, the
vector ranks memories of both languages by meaning (Chinese queries' dense nDCG@10 0.62 → 0.83 offline on the
set; at the server's defaults 0.619 → 0.807; README "Quality").

The mean is measured, not fitted to any labels: the embedder embeds :data:`ANCHORS` (64 everyday Chinese
sentences written for this project, none from an evaluation set; any 16 consecutive ones rank about as well,
dense nDCG@10 0.767–0.783 against 0.780) as queries, and their mean unit vector is what :class:`Centring`
removes. Memories are not touched (their vectors, the index and every non-CJK query stay as they are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ANCHORS = Path(__file__).with_name("cjk_anchors.txt")


def read_anchors(path: Path = ANCHORS) -> list[str]:
    """The anchor sentences, one a line (blank lines skipped)."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Centring:
    """The anchors' mean query vector ``mean`` (not unit length) and ``offset`` = ``mean · mean``.

    A CJK query ``q`` searches with ``q - mean``, and each score it gets back is lifted by ``offset``:
    ``(q - mean) · d + mean · mean = q · d - mean · d + mean · mean``, the query's cosine with the part every
    Chinese query shares with the memory (``mean · d``: 0.84 for a Chinese memory, 0.75 for an English one on
    the zh/en set) replaced by the part the anchors share among themselves (0.85). The order is that of the
    renormalised centred vector (a positive scale per query); the scores stay on the cosine scale the relevance
    calibration was fitted on (zh/en set, Chinese queries: best hit 0.917 against 0.903 uncentred, tenth 0.875
    against 0.863), so its cosine and gap features keep their meaning.
    """

    mean: np.ndarray
    offset: float

    @classmethod
    def measure(cls, embed_queries: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]) -> Centring:
        """From the query vectors of ``texts`` (``embed_queries`` adds the embedder's query prefix)."""
        mean = np.asarray(embed_queries(list(texts)), dtype=np.float32).mean(axis=0)
        return cls(mean=mean, offset=float(mean @ mean))

    def search_vector(self, vector: np.ndarray) -> np.ndarray:
        return np.asarray(vector, dtype=np.float32) - self.mean

    def scores(self, scores: np.ndarray) -> np.ndarray:
        """Inner products with :meth:`search_vector` on the cosine scale (padding's -inf stays -inf)."""
        return scores + self.offset
