"""Self-supervised conversational queries: from the turns of a tiny synthetic LoCoMo file (no shared
data needed), seeded, the positive is the source turn, the negatives are other turns of the same
conversation, the questions and labels are never read, and ``--locomo 0`` turns the source off."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.quality.datasets import Turn, contextualise, load_locomo_turns
from training import mine as mining
from training.bm25 import tokens
from training.conversation import (QUESTION_FORMS, content_words, doc_id, mine_turn_queries, turn_docs, turn_queries,
                                   turn_questions)
from training.data import MinedQuery
from training.recipe import parse, training_groups

SECRET = "zanzibar"  # only in the questions, answers, evidence and summaries: must never reach training data

_TALK = {
    "conv-a": ("Ann", "Bob", [
        "Hey Bob! I adopted a rescue puppy from the shelter last weekend, she is tiny and brown.",
        "That is wonderful news Ann, what breed is the rescue puppy and how old is she now?",
        "She is a beagle mix, about four months old, and she chews every shoe in the apartment.",
        "My sister has a beagle too, it howls whenever the mail carrier walks past the window.",
        "I started pottery classes at the community center downtown on Tuesday evenings.",
        "Pottery sounds relaxing, did you make a bowl or a mug at the first pottery class?",
        "I made a lopsided mug, the teacher said the clay was too wet on the wheel.",
        "We are planning a camping trip to the mountains in August with the whole family.",
        "Camping in the mountains is great, remember to pack warm sleeping bags for the cold nights.",
        "The puppy will come camping with us, she loves hiking trails and muddy rivers.",
        "I adopted a rescue puppy from the shelter last weekend, she is tiny and brown.",  # a near-duplicate
        "Thanks!",
    ]),
    "conv-b": ("Cy", "Dee", [
        "I finally finished my marathon training plan and ran twenty miles on Sunday morning.",
        "Twenty miles is incredible Cy, how are your knees holding up after the long run?",
        "My knees are sore but the physical therapist gave me stretching exercises to do daily.",
        "I joined a book club that reads historical novels about ancient Rome every month.",
        "Which historical novel about Rome is the book club reading this month, any favourites?",
        "We are reading a novel about a gladiator who escapes the arena and sails to Egypt.",
        "My garden tomatoes finally turned red after weeks of rain and cloudy summer weather.",
        "Fresh garden tomatoes make the best sauce, my grandmother cooked sauce every Sunday.",
    ]),
}


def _sample(conv_id: str) -> dict:
    a, b, texts = _TALK[conv_id]
    half = len(texts) // 2
    sessions = {1: texts[:half], 2: texts[half:]}
    conversation: dict = {"speaker_a": a, "speaker_b": b}
    for n, chunk in sessions.items():
        conversation[f"session_{n}_date_time"] = f"1:56 pm on {n * 3} May, 2023"
        conversation[f"session_{n}"] = [{"speaker": (a, b)[i % 2], "dia_id": f"D{n}:{i + 1}", "text": t}
                                        for i, t in enumerate(chunk)]
    return {"sample_id": conv_id, "conversation": conversation,
            "qa": [{"question": f"Where did {a} go on {SECRET} holiday?", "answer": f"{SECRET} island",
                    "evidence": ["D1:1"], "category": 4}],
            "event_summary": {"events": f"{SECRET} trip"}, "observation": {"obs": SECRET},
            "session_summary": {"session_1_summary": SECRET}}


def _write(root: Path, *, annotations: bool = True) -> Path:
    samples = [_sample(c) for c in _TALK]
    if not annotations:
        samples = [{"sample_id": s["sample_id"], "conversation": s["conversation"]} for s in samples]
    (root / "locomo").mkdir(parents=True, exist_ok=True)
    (root / "locomo" / "locomo_dev5.json").write_text(json.dumps(samples), encoding="utf-8")
    return root


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return _write(tmp_path / "data")


@pytest.fixture()
def conversations(root: Path) -> dict[str, tuple[Turn, ...]]:
    return load_locomo_turns(root)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z0-9']+", text)}


def test_loader_reads_the_conversation_text_only(root: Path, tmp_path: Path,
                                                 conversations: dict[str, tuple[Turn, ...]]) -> None:
    assert sorted(conversations) == ["conv-a", "conv-b"]
    assert [t.id for t in conversations["conv-b"]] == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D2:4"]
    assert conversations["conv-a"][1].speaker == "Bob" and conversations["conv-a"][6].session == 2
    # the same turns from a file that has no questions, answers, evidence or summaries at all
    assert load_locomo_turns(_write(tmp_path / "bare", annotations=False)) == conversations
    assert not any(SECRET in t.text for turns in conversations.values() for t in turns)


def test_queries_are_seeded_and_stable_as_count_grows(conversations: dict[str, tuple[Turn, ...]]) -> None:
    first = turn_queries(conversations, count=8, seed=5)
    assert len(first) == 8 and first == turn_queries(conversations, count=8, seed=5)
    assert turn_queries(conversations, count=12, seed=5)[:8] == first
    assert [q.text for q in turn_queries(conversations, count=8, seed=6)] != [q.text for q in first]
    assert mine_turn_queries(conversations, count=8, seed=5) == mine_turn_queries(conversations, count=8, seed=5)


def test_queries_are_a_few_content_words_of_their_own_turn(conversations: dict[str, tuple[Turn, ...]]) -> None:
    queries = turn_queries(conversations, count=100, seed=1)
    all_turns = [t for turns in conversations.values() for t in turns]
    assert len(queries) == len([t for t in all_turns if len(t.text.split()) >= 6])  # every long turn, "Thanks!" never
    assert len({(q.conversation, q.turn.id) for q in queries}) == len(queries)
    for q in queries:
        assert q.turn in conversations[q.conversation]
        words = q.text.split()
        assert 3 <= len(words) <= 8
        assert _words(q.text) <= _words(q.turn.text) | {q.turn.speaker.lower()}
        assert {w.lower() for w in words} - {q.turn.speaker.lower()} <= {w.lower() for w in content_words(q.turn.text)}
        assert SECRET not in q.text.lower()
    assert [q.form for q in queries[:4]] == ["raw", "contextualised", "raw", "contextualised"]
    assert content_words("Hey! I'm so glad the pottery class went well, it's a great mug") == ["pottery", "class",
                                                                                                  "went", "mug"]


def test_positive_is_the_source_turn_and_negatives_are_its_conversation(
        conversations: dict[str, tuple[Turn, ...]]) -> None:
    docs = turn_docs(conversations)
    mined = mine_turn_queries(conversations, count=100, seed=3)
    by_query = {q.text: q for q in turn_queries(conversations, count=100, seed=3)}
    assert len(mined) == len(by_query) and any(m.candidates for m in mined)
    for m in mined:
        q = by_query[m.text]
        (positive,) = m.positives
        assert positive == doc_id(q.conversation, q.turn.id, q.form)
        assert docs[positive] == (q.turn.text if q.form == "raw" else contextualise(q.turn))
        assert positive not in m.candidates and len(set(m.candidates)) == len(m.candidates)
        for c in m.candidates:
            assert c.startswith(f"locomo/{q.conversation}/") and c.endswith(f"/{q.form}")
            assert docs[c] != docs[positive]
            assert not set(tokens(m.text)) <= set(tokens(docs[c]))  # would answer the query as well


def test_near_duplicates_of_the_positive_are_never_negatives(conversations: dict[str, tuple[Turn, ...]]) -> None:
    twins = {"D1:1", "D2:5"}  # the same sentence said twice in conv-a
    mined = mine_turn_queries(conversations, count=100, seed=2)
    seen = 0
    for m in mined:
        turn_id = m.positives[0].split("/")[2]
        if m.positives[0].startswith("locomo/conv-a/") and turn_id in twins:
            seen += 1
            assert not any(c.split("/")[2] in twins for c in m.candidates)
    assert seen == 2


def test_zero_turns_the_source_off(tmp_path: Path, conversations: dict[str, tuple[Turn, ...]]) -> None:
    assert turn_queries(conversations, count=0, seed=1) == []
    cache = tmp_path / "cache"
    mining.mine_locomo(cache, count=0, seed=1, root=tmp_path / "nowhere")  # reads nothing, writes nothing
    assert not cache.exists()
    assert mining.load_locomo_queries(cache, count=0) == ([], {})
    assert parse([]).locomo == 1500 and parse(["--locomo", "0"]).locomo == 0


def test_mined_file_is_cached(tmp_path: Path, root: Path) -> None:
    cache = tmp_path / "cache"
    mining.mine_locomo(cache, count=5, seed=1, root=root)
    mined, texts = mining.load_locomo_queries(cache, count=5)
    assert len(mined) == 5 and all(c in texts for m in mined for c in (*m.positives, *m.candidates))
    mining.mine_locomo(cache, count=4, seed=1, root=tmp_path / "nowhere")  # cached: the data is not read again
    assert mining.load_locomo_queries(cache, count=4)[0] == mined[:4]


DOCS = {f"d{i}": f"scientific abstract number {i} about topic {i % 3}" for i in range(10)}


def _scifact_cache(cache: Path) -> None:
    ids = sorted(DOCS)
    claims = [MinedQuery(id=f"c{i}", text=f"claim {i}", positives=(ids[i],), candidates=tuple(ids)) for i in range(6)]
    mining.save(cache / mining.TRAIN_FILE, claims)
    mining.save(cache / mining.SELFSUP_FILE, [])
    mining.save(cache / mining.TEST_FILE, claims[:2])


@pytest.mark.parametrize("count", [0, 6])
def test_recipe_pool_takes_conversational_groups_only_when_asked(tmp_path: Path, root: Path, count: int) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    _scifact_cache(cache)
    mining.mine_locomo(cache, count=count, seed=13, root=root)  # what the recipe would mine from the shared data
    args = parse(["--cache", str(cache), "--negatives", "2", "--selfsup", "0", "--locomo", str(count)])
    groups, counts = training_groups(args, DOCS, seed=13)
    turns = set(turn_docs(load_locomo_turns(root)).values())
    from_turns = [g for g in groups if g.passages[0] in turns]
    assert counts["locomo_queries"] == count and counts["locomo_groups"] == len(from_turns)
    assert counts["groups"] == len(groups) == counts["train_claims"] + len(from_turns)
    assert all(set(g.passages) <= turns for g in from_turns)
    assert all(not set(g.passages) & turns for g in groups if g not in from_turns)
    assert (count > 0) == bool(from_turns) == (cache / mining.LOCOMO_FILE).is_file()
    assert training_groups(args, DOCS, seed=13) == (groups, counts)


def test_questions_name_the_speaker_around_a_few_of_the_turns_words(
        conversations: dict[str, tuple[Turn, ...]]) -> None:
    questions = turn_questions(conversations, count=100, seed=4)
    assert questions == turn_questions(conversations, count=100, seed=4)
    assert turn_questions(conversations, count=5, seed=4) == questions[:5]
    # another stream than the keyword queries': not the same turns in the same order
    assert [q.turn for q in questions] != [q.turn for q in turn_queries(conversations, count=100, seed=4)]
    assert [q.form for q in questions[:4]] == ["served", "speaker", "served", "speaker"]
    frames = {re.escape(f).replace(re.escape("{s}"), "(?P<s>.+?)").replace(re.escape("{p}"), "(?P<p>.+)")
              for f in QUESTION_FORMS}
    for q in questions:
        match = next(m for m in (re.fullmatch(f, q.text) for f in frames) if m)
        assert match["s"] == q.turn.speaker
        picked = match["p"].split()
        assert 2 <= len(picked) <= 5 and set(picked) <= set(content_words(q.turn.text))
        assert q.asks == " ".join([q.turn.speaker, *picked])
        assert SECRET not in q.text.lower()


def test_served_form_is_what_the_server_reads_of_a_turn(conversations: dict[str, tuple[Turn, ...]]) -> None:
    docs = turn_docs(conversations)
    turns = conversations["conv-a"]
    first, second, next_session = turns[0], turns[1], turns[6]
    assert docs[doc_id("conv-a", first.id, "speaker")] == f"Ann: {first.text}"
    # the session's first turn has no context; the next one reads the turn before it, as the server threads them
    assert docs[doc_id("conv-a", first.id, "served")] == f"[3 May 2023] Ann: {first.text}"
    assert docs[doc_id("conv-a", second.id, "served")] == (f"[3 May 2023] Bob: {second.text}"
                                                           f"\ncontext: Ann: {first.text}")
    assert next_session.session == 2 and docs[doc_id("conv-a", next_session.id, "served")] == (
        f"[6 May 2023] Ann: {next_session.text}")


def test_question_negatives_hold_the_reply_but_never_a_turn_that_says_every_asked_word(
        conversations: dict[str, tuple[Turn, ...]]) -> None:
    docs = turn_docs(conversations)
    mined = mine_turn_queries(conversations, count=100, seed=3, questions=True)
    asked = {q.text: q for q in turn_questions(conversations, count=100, seed=3)}
    replies = 0
    for m in mined:
        q = asked[m.text]
        (positive,) = m.positives
        assert positive == doc_id(q.conversation, q.turn.id, q.form) and m.id.startswith("locomo-q-")
        for c in m.candidates:
            assert c.endswith(f"/{q.form}") and c != positive
            own = docs[c].partition("\ncontext: ")[0]
            assert not set(tokens(q.asks)) <= set(tokens(own))
            replies += q.form == "served" and f"context: {q.turn.speaker}: {q.turn.text}" in docs[c]
    assert replies > 0   # the turn that answers the positive (its context) is a negative: it is not the one asked


def test_questions_are_mined_from_the_dev_conversations_only(tmp_path: Path, root: Path) -> None:
    cache = tmp_path / "cache"
    mining.mine_locomo_questions(cache, count=6, seed=1, root=root)   # the default: LoCoMo's dev conversations only
    assert mining.load_locomo_queries(cache, count=6, questions=True)[0] == []   # the fixture has none of them
    mining.mine_locomo_questions(cache, count=6, seed=1, root=root, only=("conv-b",))
    mined, texts = mining.load_locomo_queries(cache, count=6, questions=True)
    assert len(mined) == 6 and all(m.id.startswith("locomo-q-conv-b-") for m in mined)
    assert all(c in texts and c.startswith("locomo/conv-b/") for m in mined for c in (*m.positives, *m.candidates))
    assert not (cache / mining.LOCOMO_FILE).exists()   # the keyword queries' file is another one
    assert parse([]).locomo_questions == 0


def test_recipe_pool_takes_question_groups_when_asked(tmp_path: Path, root: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    _scifact_cache(cache)
    mining.mine_locomo_questions(cache, count=5, seed=13, root=root, only=None)
    args = parse(["--cache", str(cache), "--negatives", "2", "--selfsup", "0", "--locomo", "0",
                  "--locomo-questions", "5"])
    groups, counts = training_groups(args, DOCS, seed=13)
    docs = turn_docs(load_locomo_turns(root))
    served = {t for d, t in docs.items() if d.endswith(("/served", "/speaker"))}
    from_questions = [g for g in groups if g.passages[0] in served]
    assert counts["locomo_questions"] == 5 and counts["locomo_queries"] == 0
    assert counts["locomo_groups"] == len(from_questions) > 0
    assert counts["groups"] == len(groups) == counts["train_claims"] + len(from_questions)
    assert all(set(g.passages) <= served and g.query.endswith(("?", ".")) for g in from_questions)
    assert "locomo_questions" not in training_groups(parse(["--cache", str(cache), "--negatives", "2", "--selfsup",
                                                            "0", "--locomo", "0"]), DOCS, seed=13)[1]


def test_the_turn_texts_hold_every_conversation_whichever_file_was_mined_last(tmp_path: Path, root: Path) -> None:
    cache = tmp_path / "cache"
    mining.mine_locomo(cache, count=6, seed=1, root=root)
    mining.mine_locomo_questions(cache, count=3, seed=1, root=root, only=("conv-b",))
    mined, texts = mining.load_locomo_queries(cache, count=6)
    assert {c.split("/")[1] for m in mined for c in m.positives} == {"conv-a", "conv-b"}
    assert all(c in texts for m in mined for c in (*m.positives, *m.candidates))
