"""training.bm25: the mined candidates' order does not depend on the process's string-hash salt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# Two documents whose scores tie or not depending only on the order the query's terms are summed in:
# (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1 == 0.6 in binary floating point.
_PROBE = """
import json
import numpy as np
from scipy import sparse
from training.bm25 import BM25

index = BM25.__new__(BM25)
index.ids = ["a", "b"]
index.vocab = {"alpha": 0, "beta": 1, "gamma": 2, "delta": 3}
index.idf = np.ones(4)
index.weights = sparse.csc_matrix(np.array([[0.0, 0.0, 0.0, 0.6], [0.1, 0.2, 0.3, 0.0]]))
print(json.dumps(index.search("alpha beta gamma delta", 2)))
"""


def test_search_order_is_the_same_under_every_hash_seed() -> None:
    orders = set()
    for seed in range(12):
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=REPO, capture_output=True, text=True,
                             check=True)
        orders.add(tuple(json.loads(out.stdout)))
    assert len(orders) == 1, orders
