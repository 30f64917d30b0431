"""The labelled reviewer of benchmarks/quality/link_review.py: it names the older half of a labelled change, none
for anything else, and its noisy twin is wrong on about the share asked, never by naming the right one."""

from __future__ import annotations

from benchmarks.quality.datasets import load_recency
from benchmarks.quality.link_probe import CHANGE_KINDS
from benchmarks.quality.link_review import oracle


def _items() -> tuple[list[dict], list[str | None]]:
    rs = load_recency(name="recency_dev3")
    text = {m.id: m.content for m in rs.memories}
    others = [m.content for m in rs.memories][:3]
    items, right = [], []
    for q in rs.queries:
        if rs.kind[q.id] not in CHANGE_KINDS:
            continue
        for old, new in ((s, r) for s in rs.stale[q.id] for r in rs.qrels[q.id]):
            old, new = (new, old) if rs.kind[q.id] != "newer" else (old, new)
            earlier = [t for t in others if t not in (text[old], text[new])][:2] + [text[old]]
            items.append({"n": len(items) + 1, "new": {"text": text[new]},
                          "earlier": [{"id": "abc"[k], "text": t} for k, t in enumerate(earlier)]})
            right.append("abc"[len(earlier) - 1])
    return items, right


def test_the_reviewer_names_the_labelled_change_and_none_otherwise() -> None:
    items, right = _items()
    answer, counts = oracle("recency_dev3")
    assert [answer(it) for it in items] == right
    assert counts == {"items": len(items), "labelled change offered": len(items), "wrong answers": 0}
    lone = dict(items[0], earlier=[e for e in items[0]["earlier"] if e["id"] != right[0]])
    assert answer(lone) is None


def test_the_noisy_reviewer_is_wrong_on_about_its_share_and_the_same_every_run() -> None:
    items, right = _items()
    answers = [oracle("recency_dev3", wrong=0.5, seed=1)[0] for _ in range(2)]
    got = [[a(it) for it in items] for a in answers]
    assert got[0] == got[1]
    wrong = [g != r for g, r in zip(got[0], right, strict=True)]
    assert 0.25 < sum(wrong) / len(wrong) < 0.75
