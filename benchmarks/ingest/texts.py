"""Conversation turns to ingest, built from LoCoMo's turns (benchmarks.quality.datasets.load_locomo_turns, the
conversation text alone; nothing is written to the repository).

``long_turns``: ~1 KB turns, each a run of consecutive turns of one conversation starting at a random turn
("<speaker>: <text>" lines until the text passes ``min_chars``), the way an agent stores a chat exchange.
``short_turns``: LoCoMo-sized turns (~130 characters): one speaker line made of two sentences drawn from
different turns, so tens of thousands of them are distinct texts (LoCoMo's dev set has 2,760 turns).
Both are seeded, so a run and its rerun ingest the same texts. ``synthetic=True``: the same shapes from
templates (:func:`synthetic_lines`), for a box without the data (benchmarks/gpu/run.sh).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from benchmarks.quality.datasets import load_locomo_turns

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


_PEOPLE = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemi", "Luca")
_OPENERS = ("I finally", "Last week I", "Yesterday we", "My sister and I", "This morning I", "Over the weekend we",
            "After work I", "Before the trip I", "Since March I have", "On Friday my team")
_ACTS = ("signed up for a pottery class", "repainted the kitchen a pale green", "adopted a rescue dog called Pepper",
         "started training for the autumn half marathon", "booked flights to Lisbon for the conference",
         "moved the standup to ten thirty", "planted tomatoes and basil on the balcony",
         "switched our budget spreadsheet to the new tool", "read the second book of the trilogy",
         "fixed the leaking tap in the bathroom", "met the new neighbours from the third floor",
         "tried the ramen place near the station", "sold the old bike to a student", "joined the choir at church")
_AFTER = ("and it went better than I expected.", "but it took most of the afternoon.", "so I am exhausted now.",
          "which my mum keeps asking about.", "and I would like to do it again next month.",
          "even though the weather was awful.", "because the doctor said it would help.",
          "and everyone at work noticed.", "although it cost more than we planned.")
_ASKS = ("How was your week?", "Did you ever try that?", "What do you think I should do next?",
         "Any tips for a beginner?", "Are you still going to the reunion?", "Shall we meet on Sunday?")


def synthetic_lines(conversations: int = 40, turns: int = 80, seed: int = 3) -> list[list[str]]:
    """Conversations of "<speaker>: <text>" lines made from templates: two speakers taking turns, one to three
    sentences a turn (~130 characters on average, LoCoMo's size)."""
    rng = random.Random(seed)
    out = []
    for _ in range(conversations):
        a, b = rng.sample(_PEOPLE, 2)
        lines = []
        for i in range(turns):
            said = [f"{rng.choice(_OPENERS)} {rng.choice(_ACTS)} {rng.choice(_AFTER)}"
                    for _ in range(rng.choice((1, 1, 2)))]
            if rng.random() < 0.4:
                said.append(rng.choice(_ASKS))
            lines.append(f"{(a, b)[i % 2]}: {' '.join(said)}")
        out.append(lines)
    return out


def _lines(root: Path | None, synthetic: bool = False) -> list[list[str]]:
    if synthetic:
        return synthetic_lines()
    return [[f"{t.speaker}: {t.text}" for t in turns] for turns in load_locomo_turns(root).values()]


def long_turns(n: int, *, min_chars: int = 1000, seed: int = 1, root: Path | None = None,
               synthetic: bool = False) -> list[str]:
    rng = random.Random(seed)
    conversations = _lines(root, synthetic)
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


def short_turns(n: int, *, seed: int = 2, root: Path | None = None, synthetic: bool = False) -> list[str]:
    rng = random.Random(seed)
    speakers_sentences: list[tuple[str, str]] = []
    for lines in _lines(root, synthetic):
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
