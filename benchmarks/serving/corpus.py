"""Synthetic agent memories and queries for the serving benchmark: realistic in length (10–60 words),
varied in vocabulary, deterministic for a seed. Nothing here is meant to be a quality benchmark; it
exists so that tokenization, BM25 and the dense index see text shaped like the real thing.
"""

from __future__ import annotations

import random

PEOPLE = ["Alice", "Bob", "Carmen", "Deepak", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal",
          "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tariq", "Uma", "Viktor",
          "Wen", "Ximena", "Yusuf", "Zoe", "the user", "the customer", "my manager", "the landlord"]
TOPICS = ["the quarterly budget", "the database migration", "the hiking trip", "her sister's wedding",
          "the kitchen renovation", "the flight to Lisbon", "the grant proposal", "the new laptop",
          "the dentist appointment", "the onboarding plan", "the garden irrigation", "the tax return",
          "the marathon training", "the piano lessons", "the release checklist", "the insurance claim",
          "the conference talk", "the vegetarian recipes", "the apartment lease", "the team offsite",
          "the podcast episode", "the car service", "the security audit", "the birthday party",
          "the research paper", "the kubernetes cluster", "the invoice dispute", "the language course"]
VERBS = ["prefers", "asked about", "is worried about", "finished", "postponed", "wants to revisit",
         "agreed to", "complained about", "is excited about", "needs help with", "cancelled",
         "mentioned", "rescheduled", "approved", "forgot about", "keeps asking about", "reviewed"]
TIMES = ["last Tuesday", "this morning", "two weeks ago", "over the weekend", "in early March",
         "yesterday evening", "at the end of the sprint", "before the holidays", "during lunch",
         "on the call with the vendor", "after the standup", "next Friday"]
DETAILS = ["because the deadline moved", "and wants a summary by email", "so remind them on Monday",
           "which costs about 340 euros", "and the budget is tight", "but only if it does not rain",
           "and prefers short answers", "since the previous attempt failed", "with a strong opinion on it",
           "and shared a link to the spreadsheet", "and it must stay confidential",
           "while travelling with two kids", "using the blue notebook", "to avoid the morning traffic",
           "after reading the contract twice", "with help from the support team"]
FILLERS = ["Noted for later.", "This came up again.", "Worth remembering.", "Confirmed twice.",
           "They were clear about it.", "It seemed important to them.", "Follow up if nothing changes."]


def _sentence(rng: random.Random) -> str:
    person = rng.choice(PEOPLE)
    return (f"{person[0].upper() + person[1:]} {rng.choice(VERBS)} {rng.choice(TOPICS)} {rng.choice(TIMES)}"
            + (f" {rng.choice(DETAILS)}." if rng.random() < 0.7 else "."))


def sentence_pool(n: int, *, seed: int = 0) -> list[str]:
    """``n`` distinct sentences (about 6 to 20 words each) that memories are made of."""
    rng = random.Random(seed)
    seen: dict[str, None] = dict.fromkeys(FILLERS)
    while len(seen) < n:
        seen[_sentence(rng)] = None
    return list(seen)[:n]


def memories(n: int, pool: list[str], *, seed: int = 0) -> list[tuple[str, list[int]]]:
    """``n`` memories of 10 to 60 words: (text, indices of the pool sentences it is made of)."""
    rng = random.Random(seed)
    out: list[tuple[str, list[int]]] = []
    for _ in range(n):
        wanted = rng.randint(10, 60)
        parts: list[int] = []
        words = 0
        while words < wanted:
            i = rng.randrange(len(pool))
            size = len(pool[i].split())
            if words + size > 60:
                if words >= 10:
                    break
                continue
            parts.append(i)
            words += size
        out.append((" ".join(pool[i] for i in parts), parts))
    return out


def query_texts(n: int, *, seed: int = 1) -> list[str]:
    """Short questions an agent would ask of its memory (5 to 15 words)."""
    rng = random.Random(seed)
    forms = ["what does {p} think about {t}", "when did {p} mention {t}", "anything I should remember about {t}",
             "did {p} say something about {t} {w}", "remind me what happened with {t}",
             "what are {p}'s preferences regarding {t}"]
    return [rng.choice(forms).format(p=rng.choice(PEOPLE), t=rng.choice(TOPICS), w=rng.choice(TIMES))
            for _ in range(n)]
