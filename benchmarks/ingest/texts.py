"""Conversation turns to ingest, built from LoCoMo's turns (benchmarks.quality.datasets.load_locomo_turns, the
conversation text alone; nothing is written to the repository).

``long_turns``: ~1 KB turns, each a run of consecutive turns of one conversation starting at a random turn
("<speaker>: <text>" lines until the text passes ``min_chars``), the way an agent stores a chat exchange.
``short_turns``: LoCoMo-sized turns (~130 characters): one speaker line made of two sentences drawn from
different turns, so tens of thousands of them are distinct texts (LoCoMo's dev set has 2,760 turns).
Both are seeded, so a run and its rerun ingest the same texts.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from benchmarks.quality.datasets import load_locomo_turns

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _lines(root: Path | None) -> list[list[str]]:
    return [[f"{t.speaker}: {t.text}" for t in turns] for turns in load_locomo_turns(root).values()]


def long_turns(n: int, *, min_chars: int = 1000, seed: int = 1, root: Path | None = None) -> list[str]:
    rng = random.Random(seed)
    conversations = _lines(root)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        lines = rng.choice(conversations)
        start = rng.randrange(len(lines))
        parts: list[str] = []
        for line in lines[start:] + lines[:start]:
            parts.append(line)
            if sum(len(p) + 1 for p in parts) >= min_chars:
                break
        text = "\n".join(parts)
        if text not in seen:   # more texts asked for than starts: the same start with one line fewer or more
            seen.add(text)
            out.append(text)
        else:
            min_chars += 1
    return out


def short_turns(n: int, *, seed: int = 2, root: Path | None = None) -> list[str]:
    rng = random.Random(seed)
    speakers_sentences: list[tuple[str, str]] = []
    for lines in _lines(root):
        for line in lines:
            speaker, _, text = line.partition(": ")
            speakers_sentences += [(speaker, s) for s in _SENTENCE.split(text) if len(s) > 15]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        (speaker, first), (_, second) = rng.choice(speakers_sentences), rng.choice(speakers_sentences)
        text = f"{speaker}: {first} {second}"
        if first != second and text not in seen:
            seen.add(text)
            out.append(text)
    return out
