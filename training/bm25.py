"""A small in-memory BM25 (Lucene's formula, k1 = 0.9, b = 0.4 as in Pyserini's BEIR runs) for mining
hard negatives without a server: the corpus is tokenised once into a sparse matrix."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                  "there these they this to was will with".split())


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


class BM25:
    def __init__(self, docs: Mapping[str, str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self.ids = sorted(docs)
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(self.ids), dtype=np.float64)
        for r, doc_id in enumerate(self.ids):
            toks = tokens(docs[doc_id])
            lengths[r] = len(toks)
            counts: dict[int, int] = {}
            for t in toks:
                col = vocab.setdefault(t, len(vocab))
                counts[col] = counts.get(col, 0) + 1
            rows += [r] * len(counts)
            cols += list(counts)
            vals += list(counts.values())
        tf = sparse.csr_matrix((vals, (rows, cols)), shape=(len(self.ids), len(vocab)), dtype=np.float64)
        df = np.bincount(tf.indices, minlength=len(vocab))
        self.idf = np.log(1 + (len(self.ids) - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        weighted = tf.tocoo()
        weighted.data = weighted.data * (k1 + 1) / (weighted.data + norm[weighted.row])
        self.weights = weighted.tocsc()
        self.vocab = vocab

    def search(self, query: str, k: int, *, exclude: Sequence[str] = ()) -> list[str]:
        """Top ``k`` doc ids by BM25 (ties broken by doc id order)."""
        # The query's terms in a fixed order: summed in the order of a set, the scores of two turns that tie
        # could differ in the last bit from one process to the next (string hashes are salted per process).
        cols = [self.vocab[t] for t in sorted(set(tokens(query))) if t in self.vocab]
        if not cols:
            return []
        scores = np.asarray(self.weights[:, cols] @ self.idf[cols]).ravel()
        order = np.lexsort((np.arange(len(scores)), -scores))
        skip = set(exclude)
        return [self.ids[i] for i in order[:k + len(skip)] if scores[i] > 0 and self.ids[i] not in skip][:k]
