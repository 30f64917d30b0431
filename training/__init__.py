"""engram's own cross-encoder reranker: a reproducible, offline training recipe (`make reranker`).

Stages: :mod:`.mine` (BM25 candidate lists), :mod:`.data` (training
groups: SciFact train claims and self-supervised sentence queries, each with one positive and hard
negatives), :mod:`.conversation` (self-supervised queries from LoCoMo conversation turns, the
conversation text only, never its questions, answers or evidence labels), :mod:`.train` (listwise fine-tuning of the packaged MiniLM with a fresh head),
:mod:`.evaluate` (BM25 vs BM25 + reranker) and :mod:`.recipe` (the whole run, with its log).
"""
