"""Loading a tenant shard's indexes from its store: the dense index from its snapshot caught up with the log
(or rebuilt from the logged vectors), the Lucene index replayed from the log past its last commit (or rebuilt
when it claims more than the log holds). Pure functions of the store's replay; the shard calls them once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

import numpy as np

from server.index.ivf import ivf_from_payload
from server.index.memory_vectors import expand, removal_ids
from server.index.tiered import TieredDenseIndex, VectorIndex
from server.index.tiers import TierRules
from server.lexical.lucene import LuceneIndex
from server.store.memory_store import Replayed, TenantStore
from server.store.snapshot import install_snapshot, read_snapshot, snapshot_header
from server.text import memory_text

log = logging.getLogger(__name__)

DENSE_SNAPSHOT = "dense.snap"


def restore_artefacts(directory: Path, store: TenantStore) -> None:
    """Installs the index snapshots the replayed base carried (object storage) where they are newer than the
    local ones: a node with an empty disk loads the IVF index the last owner compacted with, caught up from
    the log like its own snapshot would be, instead of training one."""
    for name, data in store.take_artefacts().items():
        if name != DENSE_SNAPSHOT:
            log.warning("tenant dir %s: unknown artefact %r in the log's base; ignored", directory.name, name)
            continue
        offered = snapshot_header(data)
        local = snapshot_header(directory / name) if (directory / name).is_file() else None
        if offered is None or (local is not None and int(local.get("seq", -1)) >= int(offered.get("seq", -1))):
            continue
        try:
            install_snapshot(directory / name, data)
        except OSError as exc:   # a full disk: the index is built from the replayed vectors instead
            log.warning("tenant dir %s: the base's dense snapshot could not be installed (%s)", directory.name, exc)
            continue
        log.info("tenant dir %s: dense snapshot at seq %s from the log's base", directory.name, offered.get("seq"))


def load_lexical(tenant_id: str, directory: Path, store: TenantStore, replayed: Replayed) -> LuceneIndex:
    """The tenant's Lucene index at the store's seq: replayed past its last commit, or rebuilt from the
    store when it claims changes the log does not hold, or predates the history the log kept (a compaction
    whose Lucene commit was skipped or failed, or one by another owner): the deletes folded into the base
    would never reach it."""
    lexical = LuceneIndex.open(directory / "lucene")
    committed = lexical.committed_seq()
    if committed > store.seq or 0 < committed < store.history_from:
        log.warning("tenant %s: lexical index at seq %d, the log at %d (history from %d); rebuilding",
                    tenant_id, committed, store.seq, store.history_from)
        lexical.delete_all()
        lexical.upsert([(m.doc_id, memory_text(m)) for m in store.all()])
    else:
        _replay_lexical(lexical, [op for op in replayed.lexical_ops if op[0] > committed])
    lexical.refresh()
    lexical.commit(store.seq)
    return lexical


def load_dense(directory: Path, store: TenantStore, replayed: Replayed, *, dim: int, rules: TierRules,
                builder: Executor | None, flat_factory: Callable[[int], VectorIndex],
                ) -> tuple[TieredDenseIndex, int]:
    """The IVF snapshot caught up with the log when usable; otherwise a flat index of the logged vectors. Long
    memories' passage vectors come from the log with their main vectors (server/index/memory_vectors.py)."""
    counts = {doc: len(rows) for doc, rows in replayed.passages.items()}
    snap = read_snapshot(directory / DENSE_SNAPSHOT)
    if snap is not None:
        header, payload = snap
        seq = int(header.get("seq", -1))
        if header.get("dim") == dim and store.compacted_seq <= seq <= store.seq:
            try:
                ivf = ivf_from_payload(payload, dim=dim, rules=rules, description=str(header.get("description", "")))
            except (RuntimeError, ValueError) as exc:
                log.warning("tenant dir %s: dense snapshot unreadable (%s); rebuilding", directory.name, exc)
            else:
                del payload
                replayed_changes = _catch_up(ivf, replayed, after_seq=seq)
                if len(ivf) == len(replayed.vectors) + sum(counts.values()):
                    index = TieredDenseIndex(dim, rules=rules, builder=builder, initial=ivf,
                                             built_n=int(header.get("built_n", len(ivf))),
                                             exact_source=store.exact_vectors, passages=counts)
                    return index, 0 if replayed_changes else seq   # 0: snapshot again on close
                log.warning("tenant dir %s: dense snapshot holds %d vectors, the store %d; rebuilding",
                            directory.name, len(ivf), len(replayed.vectors))
        else:
            log.warning("tenant dir %s: dense snapshot is stale (seq %d, store %d, dim %s); rebuilding",
                        directory.name, seq, store.seq, header.get("dim"))
    index = TieredDenseIndex(dim, rules=rules, builder=builder, flat_factory=flat_factory,
                             exact_source=store.exact_vectors, passages=counts)
    if replayed.vectors:
        index.active.add(*expand(*_vector_sets(list(replayed.vectors), replayed), dim=dim)[:2])
    return index, 0


def _vector_sets(docs: list[int], replayed: Replayed) -> tuple[list[int], list[np.ndarray]]:
    """(docs, each doc's vectors: the main one, then its passages) from the replay."""
    return docs, [replayed.vectors[d] if d not in replayed.passages else
                  np.vstack([replayed.vectors[d][None, :], replayed.passages[d]]) for d in docs]


def _catch_up(index: object, replayed: Replayed, *, after_seq: int) -> int:
    """Applies the log's vector changes after ``after_seq``: docs put since are (re)added, docs deleted
    since are removed. Removing first makes a re-add (content change) never duplicate an id; every passage id a
    touched doc may have had goes too (the snapshot's counts are not known here)."""
    touched = {doc for seq, _, doc, _ in replayed.lexical_ops if seq > after_seq}
    if not touched:
        return 0
    index.remove(removal_ids(sorted(touched)))  # type: ignore[attr-defined]
    live = [d for d in touched if d in replayed.vectors]
    if live:
        ids, vectors, _ = expand(*_vector_sets(live, replayed), dim=replayed.vectors[live[0]].shape[0])
        index.add(ids, vectors)  # type: ignore[attr-defined]
    return len(touched)


def _replay_lexical(lexical: LuceneIndex, ops: list[tuple[int, str, int, str]]) -> None:
    batch: list[tuple[int, str]] = []
    for _, op, doc_id, text in ops:
        if op == "put":
            batch.append((doc_id, text))
            continue
        if batch:
            lexical.upsert(batch)
            batch = []
        lexical.delete([doc_id])
    if batch:
        lexical.upsert(batch)
