"""engram's own cross-encoder reranker: a reproducible, offline training recipe (`make reranker`).

Stages: :mod:`.mine` (candidate lists from the real server's hybrid search), :mod:`.data` (training
groups: SciFact train claims and self-supervised sentence queries, each with one positive and hard
negatives), :mod:`.train` (listwise fine-tuning of the packaged MiniLM with a fresh head),
:mod:`.evaluate` (hybrid vs hybrid + reranker) and :mod:`.recipe` (the whole run, with its log).
"""
