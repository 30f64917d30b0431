"""Connected components of items ``0 .. n-1`` under pairwise links (union-find with path halving): the groups that
near-duplicate consolidation and the newest-first rule both form from "these two belong together"."""

from __future__ import annotations

from collections.abc import Iterable


def components(n: int, links: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Every group of items the ``links`` (pairs of indices) connect, singletons included: members ascending,
    groups in the order of their smallest member."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in links:
        parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())
