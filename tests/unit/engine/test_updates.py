"""The write-time update linker (server/engine/updates.py): which pairs link and which must not."""

from __future__ import annotations

import dataclasses

import pytest

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import updates

COS = 0.95   # an embedding cosine above every threshold: these tests are about the other evidence


def mem(content: str, *, memory_id: str = "", created: int = 0, scope: str = "", type: MemoryType = MemoryType.SEMANTIC,
        key: str = "", entities: tuple[str, ...] = ()) -> Memory:
    return Memory(memory_id=memory_id or content[:12], doc_id=0, content=content, type=type, importance=0.5,
                  created_at_ms=created, last_access_at_ms=created, access_count=0, entities=entities, source_ref="",
                  scope=scope, confidence=1.0, key=key, status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=created)


def judge(old: str, new: str, cosine: float = COS, **kw) -> updates.Evidence | None:  # type: ignore[no-untyped-def]
    return updates.judge(mem(new, **kw), mem(old, **kw), cosine, min_cosine=0.82)


@pytest.mark.parametrize(("old", "new", "attribute"), [
    ("My laptop is a ThinkPad", "I switched to a Framework laptop", "computer"),
    ("I live in Austin.", "I moved to Melbourne.", "home"),
    ("My manager is Priya", "After the reorg my manager is Tom", "manager"),   # the "my X is" frame, no cue
    ("Kitchen renovation budget is now 3,000 dollars.", "Kitchen renovation budget is now 8,000 dollars.", "money"),
    ("Caroline: My phone is a Pixel 6", "Caroline: Got a new phone, an iPhone 15", "phone"),
    ("预算三万", "预算改成八万了", "money"),
    ("我住在北京。", "我搬到厦门住了。", "home"),
    ("我的手机是华为Mate60。", "我换了新手机，是iPhone 15。", "phone"),
    ("Our internet provider is Virgin Media", "We switched broadband to Hyperoptic", "internet"),
    ("Our babysitter is Chloe from next door", "Priti babysits for us on Fridays now", "childcare"),
    ("I park in space 14 in the basement", "My parking spot is now 9 by the lift", "parking"),
    ("My desk is number 42 on the third floor", "After the office move my desk is B-17", "desk"),   # the frame
    ("I use 1Password for my passwords", "I moved my logins to Bitwarden", "account"),
    ("I work as an analyst at Deloitte", "I started a new job as a data engineer at Spotify", "job"),
    ("儿子在阳光小学上学", "儿子升到实验中学了", "school"),
    # attributes that hold one value at a time
    ("I bank with Lloyds", "I switched my bank to Starling", "bank"),
    ("Our electricity is with Octopus", "We switched energy supplier to EDF", "energy"),
    ("My landlord is Mr Khan", "The house was sold and my landlord is now a company", "landlord"),
    ("My daughter is at Elm Tree Nursery", "My daughter started at Park Road Primary", "school"),
    ("My car insurance is with Admiral", "Changed my insurance to Aviva", "insurance"),
    ("我的体重是七十公斤", "体重降到六十五公斤了", "weight"),
    ("我的上司是刘主管", "换了部门，现在的主管是赵姐", "manager"),
])
def test_a_restated_attribute_with_a_new_value_links(old: str, new: str, attribute: str) -> None:
    evidence = judge(old, new)
    assert evidence is not None and attribute in evidence.shared


@pytest.mark.parametrize(("old", "new", "why"), [
    ("My sister lives in Madrid", "My brother moved to Toronto", "another subject"),
    ("My laptop is a ThinkPad", "My sister switched to a Framework laptop", "another subject"),
    ("Caroline: My phone is a Pixel 6", "Melanie: I switched to an iPhone 15 phone", "another speaker"),
    ("My laptop is a Framework 13.", "My phone is now a Pixel 8.", "another attribute"),
    ("我的笔记本电脑是小米笔记本。", "我的手机现在是小米12。", "another attribute sharing a brand"),
    ("My laptop is a ThinkPad", "My laptop is a ThinkPad, I use it now", "nothing new"),
    ("Cooked lasagna for dinner", "Cooked a green curry for dinner", "an event, no change cue"),
    ("We went to the park with the kids", "The park by the river is new", "an event, no change cue"),
    ("My desk is number 42 on the third floor", "My phone number is now 0161 496 0000", "another attribute"),
    ("My laptop is a ThinkPad", "Which laptop should I switch to now?", "a question"),
    ("Melanie: Wow, that's cool! What happened?", "Melanie: That's really cool. What now?", "chat, no attribute"),
    # change verbs that are no change here
    ("Jon: Thanks, Gina! Your kind words mean a lot. I won't give up!",
     "Jon: Thanks, Gina! I won't quit - your words motivate me to keep going!", "'quit' in encouragement"),
    ("I stopped by the bakery on Main Street", "I stopped by the florist on Main Street", "'stopped by' is a visit"),
    ("My cousin works at Shell", "My friend took a position at BP", "another subject"),
    ("My mobile plan is with EE", "My phone screen cracked when I dropped it", "'dropped it' is a fall"),
    ("I go to pilates on Wednesdays", "Swapped my phone for a Pixel", "no frame word in common"),
    ("My bank is Lloyds", "My phone insurance is now with Aviva", "another attribute"),
    ("I play tennis on Tuesdays", "I started swimming on Fridays", "a sport: a person has several"),
])
def test_pairs_that_must_not_link(old: str, new: str, why: str) -> None:
    assert judge(old, new) is None, why


def test_scope_type_family_cosine_and_entities_gate_the_link() -> None:
    old, new = "My laptop is a ThinkPad", "I switched to a Framework laptop"
    assert updates.judge(mem(new, scope="work"), mem(old, scope="home"), COS, min_cosine=0.82) is None
    assert updates.judge(mem(new, type=MemoryType.PROCEDURAL), mem(old), COS, min_cosine=0.82) is None
    assert updates.judge(mem(new, type=MemoryType.EPISODIC), mem(old), COS, min_cosine=0.82) is not None
    assert judge(old, new, cosine=0.80) is None
    assert updates.judge(mem(new, entities=("bob",)), mem(old, entities=("alice",)), COS, min_cosine=0.82) is None
    # Chinese text needs LINK_COSINE_CJK_SHIFT more: e5's Chinese cosines crowd higher
    assert judge("预算三万", "预算改成八万了", cosine=0.84) is None


def test_find_updated_links_the_newest_live_unlinked_older_memory_only() -> None:
    a = mem("My laptop is a ThinkPad", memory_id="a", created=1)
    b = mem("I switched to a Framework laptop", memory_id="b", created=2)
    c = mem("My laptop is now a MacBook Air", memory_id="c", created=3)
    a_linked = dataclasses.replace(a, updated_by="b")
    found = updates.find_updated(c, [(0.97, a_linked), (0.93, b)], min_cosine=0.82)
    assert found is not None and found[0].memory_id == "b"   # a chain links to its newest member
    assert updates.find_updated(a, [(0.97, b)], min_cosine=0.82) is None   # never to a newer memory
    assert updates.find_updated(dataclasses.replace(c, key="laptop"), [(0.93, b)], min_cosine=0.82) is None
    archived = dataclasses.replace(b, status=MemoryStatus.ARCHIVED)
    assert updates.find_updated(c, [(0.93, archived)], min_cosine=0.82) is None


def test_a_change_that_names_no_attribute_links_to_the_nearest_statement_that_names_one() -> None:
    ee = mem("My mobile plan is with EE", memory_id="ee", created=1)
    new = mem("Ported my number to Giffgaff", memory_id="gg", created=3)
    assert updates.judge(new, ee, 0.9, min_cosine=0.82) is None   # the pair alone: no attribute in common
    found = updates.find_updated(new, [(0.9, ee)], min_cosine=0.82)
    assert found is not None and found[0].memory_id == "ee" and found[1].shared == ("phone",)
    assert found[1].cue == "Ported"
    huawei, xiaomi = mem("我用的是华为手机", memory_id="hw", created=1), mem("入手了一台小米14", memory_id="mi", created=3)
    found = updates.find_updated(xiaomi, [(0.92, huawei)], min_cosine=0.82)
    assert found is not None and found[0].memory_id == "hw"
    # another speaker's statement is no subject of this one: the nearest of the same speaker is read
    melanie = mem("Melanie: My mobile plan is with Vodafone", memory_id="mel", created=2)
    caroline = mem("Caroline: My mobile plan is with EE", memory_id="car", created=1)
    found = updates.find_updated(mem("Caroline: Ported my number to Giffgaff", memory_id="c2", created=3),
                                 [(0.95, melanie), (0.9, caroline)], min_cosine=0.82)
    assert found is not None and found[0].memory_id == "car"


@pytest.mark.parametrize(("neighbours", "new", "why"), [
    ([("I go to pilates on Wednesdays", 0.92), ("My mobile plan is with EE", 0.9)], "Ported my number to Giffgaff",
     "the nearest statement names no attribute: the one below it is not read"),
    ([("I go to pilates on Wednesdays", 0.9)], "Swapped my phone for a Pixel", "the newer names the attribute"),
    ([("My mobile plan is with EE", 0.9)], "Giffgaff has great coverage here", "no change cue"),
    ([("My mobile plan is with EE", 0.9)], "Now I'm on Giffgaff", "'now' alone names no change"),
    ([("My mobile plan is with EE", 0.8)], "Ported my number to Giffgaff", "a cosine below the threshold"),
    ([("My mobile plan is with EE and I have had the same number for ten years, which I like a lot", 0.9)],
     "Ported my number to Giffgaff", "a long statement"),
])
def test_the_nearest_statement_rule_errs_towards_no_link(neighbours: list[tuple[str, float]], new: str,
                                                         why: str) -> None:
    olds = [(cosine, mem(text, memory_id=f"m{i}", created=1)) for i, (text, cosine) in enumerate(neighbours)]
    assert updates.find_updated(mem(new, memory_id="new", created=3), olds, min_cosine=0.82) is None, why


def test_the_nearest_statement_already_updated_is_left_to_its_chain() -> None:
    ee = dataclasses.replace(mem("My mobile plan is with EE", memory_id="ee", created=1), updated_by="x")
    assert updates.find_updated(mem("Ported my number to Giffgaff", memory_id="gg", created=3), [(0.9, ee)],
                                min_cosine=0.82) is None


def test_chain_target_picks_current_previous_and_first() -> None:
    a = mem("a", memory_id="a", created=1)
    b = dataclasses.replace(mem("b", memory_id="b", created=2), updates=("a",), updated_by="c")
    c = dataclasses.replace(mem("c", memory_id="c", created=3), updates=("b",))
    a = dataclasses.replace(a, updated_by="b")
    get = {m.memory_id: m for m in (a, b, c)}.get
    assert updates.chain_target(c, want="current", get=get).memory_id == "c"
    assert updates.chain_target(c, want="previous", get=get).memory_id == "b"
    assert updates.chain_target(c, want="first", get=get).memory_id == "a"
    by_doc = {0: a, 1: c, 2: b}.get
    assert updates.chains_of([0, 1, 2], by_doc=by_doc, get=get) == {"c": [0, 1, 2]}


@pytest.mark.parametrize(("old", "new", "frame"), [
    ("My code editor is VS Code", "I moved over to Zed as my editor", "editor"),
    ("The project codename is Falcon", "The project was renamed to Osprey", "project"),
    ("My favourite band is Radiohead", "These days my favourite band is Khruangbin", "band"),   # "my X is" on both
    ("我用的输入法是搜狗", "输入法换成了微信输入法", "输入"),
    ("项目代号叫青龙", "项目改名叫朱雀了", "项目"),
])
def test_an_attribute_no_class_names_links_by_its_frame(old: str, new: str, frame: str) -> None:
    """The frame rule: two short statements sharing a frame word, the newer naming the change; no class list."""
    assert not (updates.attributes(old) & updates.attributes(new) & (updates.named_attributes(old) |
                                                                     updates.named_attributes(new)))
    evidence = judge(old, new)
    assert evidence is not None and frame in evidence.shared
    # the frame rule sits behind the same gates: another scope is never a conflict, nor a low cosine
    assert updates.judge(mem(new, scope="work"), mem(old, scope="home"), COS, min_cosine=0.82) is None
    assert judge(old, new, cosine=0.80) is None


@pytest.mark.parametrize(("old", "new", "why"), [
    ("I moved over to Zed as my editor", "I moved my logins to Bitwarden", "'moved' is the change, not a home"),
    ("I prefer window seats", "Aisle seats suit me better now", "no frame word in common"),
    ("我用的浏览器是Chrome", "浏览了一下今天的新闻", "'的新' of 新闻 names no change"),
    ("Melanie: The kids love pottery", "Melanie: The kids love it now!", "'now' alone is no change"),
    ("Tim: Yep, I'll let you know!", "Tim: Glad you liked it. Let me know if you need any more suggestions.",
     "'any more' of a chat turn is no change"),
    ("My laptop is a Framework 13.", "I switched my phone to a Pixel 8 laptop-style case.", "another class named"),
    ("The project codename is Falcon", "We talked for a long time about how the project was renamed and what "
     "everyone on the team thought of the new name", "not a short statement"),
])
def test_pairs_the_frame_rule_must_not_link(old: str, new: str, why: str) -> None:
    assert judge(old, new) is None, why


@pytest.mark.parametrize("text", [
    "My laptop is a ThinkPad", "I switched to a Framework laptop", "Caroline: Got a new phone, an iPhone 15",
    "The project was renamed to Osprey", "My favourite band is Radiohead", "Which laptop should I switch to now?",
    "Melanie: Wow, that's cool! What happened?", "Melanie: The kids love it now!", "预算改成八万了", "输入法换成了微信输入法",
    "项目代号叫青龙", "你现在用什么手机？", "user: " + "We talked for a long time about the trip and the food " * 4,
    "assistant: I moved my logins to Bitwarden", "Tim: Yep, I'll let you know!", "",
])
def test_may_update_is_the_analysis_gate(text: str) -> None:
    """The cheap gate a new text passes before its analysis agrees with what the analysis itself would refuse."""
    a = updates._analysed.__wrapped__(text)
    assert updates.may_update(text) == (a.statement and bool(a.attributes or (a.short and (a.change or a.frames))))


@pytest.mark.parametrize(("old", "new"), [
    ("My cousin works at Shell", "My cousin took a position at BP"),
    ("Disney Plus costs me 8 pounds a month", "Disney Plus put the price up to 10 pounds"),
    ("I'm learning Italian on Babbel", "Dropped Italian to focus on Portuguese"),
    ("I go to pilates on Wednesdays", "Swapped Wednesday pilates for boxing"),
    ("I play drums in a band called Red Sky", "Left Red Sky and joined Paper Moons on drums"),
    ("My swimming goal is a mile", "Signed up for a triathlon as my next goal"),
    ("每个月车贷三千", "车贷降到两千五了"),
    ("我周末打篮球", "膝盖受伤，篮球不打了"),
    ("我在学日语", "日语放弃了，开始学德语"),
    ("I earn 35k a year", "Got a raise to 39k"),
    ("My GP is Dr Okafor", "Registered with Dr Lee at the new surgery"),
    ("I eat fish", "I've been vegan since January"),
    ("我喝奶茶加糖", "戒糖了，奶茶只喝无糖的"),
])
def test_a_verb_that_ends_or_starts_a_state_is_a_change(old: str, new: str) -> None:
    """Change verbs beside "switched to" / "换成": the state ended or began, the value changing with it."""
    assert updates.change_cue(new), new
    assert judge(old, new) is not None
