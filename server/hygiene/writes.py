"""The write path's hygiene step: each input gets its salience; a write without an importance gets the
salience-adjusted default; with a minimum salience set (the tenant's ``min_salience`` setting, else
``memory.min_salience``), inputs below it are not stored (outcome SKIPPED) unless the writer asked for them
explicitly (an importance given, or pinned)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from server.config import MemoryConfig
from server.domain import MemoryInput, MemoryStatus, WriteOutcome, WriteResult
from server.hygiene.salience import (DEFAULT_IMPORTANCE, SALIENCE_IMPORTANCE_SPAN, SalienceModel,
                                     importance_from_salience)


@dataclass(frozen=True)
class Prepared:
    inputs: list[MemoryInput]     # what goes on to be stored
    positions: list[int]          # their places in the request
    saliences: list[float]        # every input's salience, in request order


class SaliencePolicy:
    def __init__(self, *, cfg: MemoryConfig, model: SalienceModel, importance_span: float | None = None) -> None:
        """``importance_span``: other than SALIENCE_IMPORTANCE_SPAN (an ablation: 0 = salience leaves importance)."""
        self.cfg = cfg
        self.model = model
        self.importance_span = SALIENCE_IMPORTANCE_SPAN if importance_span is None else importance_span

    def prepare(self, memories: Sequence[MemoryInput], *, min_salience: float | None = None) -> Prepared:
        """``min_salience``: the tenant's threshold; None: ``memory.min_salience``."""
        cfg = self.cfg
        threshold = cfg.min_salience if min_salience is None else min_salience
        kept, positions, saliences = [], [], []
        for i, m in enumerate(memories):
            s = self.model.score(m.content)
            saliences.append(s)
            if s < threshold and m.importance is None and not m.pinned:
                continue
            importance = (m.importance if m.importance is not None else
                          importance_from_salience(s, default=DEFAULT_IMPORTANCE, span=self.importance_span))
            kept.append(dataclasses.replace(m, salience=s, importance=importance))
            positions.append(i)
        return Prepared(inputs=kept, positions=positions, saliences=saliences)

    @staticmethod
    def assemble(prepared: Prepared, results: Sequence[WriteResult]) -> list[WriteResult]:
        """One result per request input, in order; skipped inputs get outcome SKIPPED and no memory id."""
        out = [WriteResult(memory_id="", outcome=WriteOutcome.SKIPPED, status=MemoryStatus.ACTIVE, salience=s)
               for s in prepared.saliences]
        for pos, r in zip(prepared.positions, results, strict=True):
            out[pos] = dataclasses.replace(r, salience=prepared.saliences[pos])
        return out
