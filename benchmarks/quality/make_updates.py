"""Builds the knowledge-update set, ``benchmarks/quality/data/updates_{memories,queries}.jsonl`` (written for this
project; no public benchmark text): synthetic users, each with several attributes (laptop, city, job, budget, diet,
partner's name, favourite team, …) whose value changed 1–4 times over weeks, in English or Chinese, beside
distractors (other people's attributes, another scope, unrelated facts). Every attribute is asked three ways:
"now" (the newest value), "before" (the value just before it) and "at first" (the oldest).

Dev / held-out: users with an odd number are dev (they chose the update factor and the intent weights), users with
an even number are held out. One tenant per user (benchmarks/quality/suites.py ``run_updates``).

    .venv/bin/python -m benchmarks.quality.make_updates     # rewrites the two files (deterministic)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20260415
ROOT = Path(__file__).resolve().parent / "data"

# attribute: (values, first statement, update statements, (now, before, first) questions)
EN = {
    "laptop": (["ThinkPad X1 Carbon", "Framework 13", "MacBook Air M2", "Dell XPS 15", "Surface Laptop 5"],
               "My laptop is a {v}.",
               ["I switched to a {v} laptop.", "Replaced my laptop, I now use a {v}.", "My laptop is now a {v}.",
                "Got a new laptop, a {v}, and gave the old one away."],
               ("Which laptop do I use now?", "Which laptop did I use before?", "What was my first laptop?")),
    "city": (["Leeds", "Lisbon", "Berlin", "Austin", "Melbourne"],
             "I live in {v}.",
             ["I moved to {v}.", "We relocated, I now live in {v}.", "I live in {v} these days.",
              "Moved again, my home is in {v} now."],
             ("Which city do I live in now?", "Where did I live before?", "Which city did I live in originally?")),
    "job": (["a nurse at St Mary's Hospital", "a teacher at Hillside School", "a product designer at Figma",
             "a data engineer at Spotify", "a baker at Crumbs Bakery"],
            "I work as {v}.",
            ["I changed jobs, I now work as {v}.", "I switched careers and work as {v} now.",
             "New job: I started working as {v}, so my job is different now.", "I now work as {v}."],
            ("What is my job now?", "What job did I have before?", "What was my job at first?")),
    "budget": (["3,000 dollars", "5,000 dollars", "8,000 dollars", "12,000 dollars", "15,000 dollars"],
               "The budget for our kitchen renovation is {v}.",
               ["The kitchen renovation budget changed to {v}.",
                "We raised the kitchen renovation budget, it is now {v}.",
                "Kitchen renovation budget is now {v}.", "The kitchen renovation budget moved to {v}."],
               ("What is the kitchen renovation budget now?", "What was the kitchen renovation budget before?",
                "What was the kitchen renovation budget originally?")),
    "diet": (["vegetarian", "vegan", "keto", "pescatarian", "Mediterranean"],
             "I follow a {v} diet.",
             ["I switched to a {v} diet.", "I'm no longer on my old diet, I eat {v} now.",
              "These days my diet is {v}.", "I changed my diet to {v}."],
             ("What diet am I on now?", "What diet did I follow before?", "What diet did I follow at first?")),
    "partner": (["Sam", "Alex", "Jordan", "Robin", "Casey"],
                "My partner's name is {v}.",
                ["My partner is now {v}.", "I'm with someone new, my partner's name is {v} now.",
                 "My new partner is {v}.", "These days my partner is {v}."],
                ("What is my partner's name now?", "Who was my partner before?", "Who was my first partner?")),
    "team": (["Arsenal", "Liverpool", "Celtic", "Ajax", "Benfica"],
             "My favourite football team is {v}.",
             ["My favourite football team is now {v}.", "I switched allegiance, I support {v} now.",
              "These days my favourite team is {v}.", "I changed my favourite football team to {v}."],
             ("Which football team do I support now?", "Which football team did I support before?",
              "Which football team did I support originally?")),
    "phone": (["Pixel 6", "iPhone 13", "Galaxy S23", "Pixel 8", "iPhone 15"],
              "My phone is a {v}.",
              ["I switched to a {v} phone.", "Got a new phone, a {v}.", "My phone is now a {v}.",
               "Replaced my phone with a {v}."],
              ("What phone do I have now?", "What phone did I have before?", "What was my first phone?")),
    "car": (["Ford Focus", "Toyota Prius", "Tesla Model 3", "Volvo XC40", "Honda Civic"],
            "I drive a {v}.",
            ["I sold my old car and now drive a {v}.", "My car is now a {v}.", "I drive a {v} these days.",
             "Traded in my car for a {v}."],
            ("What car do I drive now?", "What car did I drive before?", "What car did I drive originally?")),
    "gym": (["PureGym", "Boulder Hub", "the YMCA", "Anytime Fitness", "Iron Temple"],
            "I train at {v} gym.",
            ["I moved to {v} gym.", "I go to {v} gym now instead.", "Switched gyms, I train at {v} now.",
             "My gym is now {v}."],
            ("Which gym do I go to now?", "Which gym did I go to before?", "Which gym did I go to at first?")),
}
ZH = {
    "笔记本": (["联想小新", "华为MateBook", "小米笔记本", "苹果MacBook", "戴尔灵越"],
            "我的笔记本电脑是{v}。",
            ["我换成了{v}笔记本电脑。", "我现在用的笔记本电脑是{v}。", "笔记本电脑改成{v}了。", "换了新笔记本电脑，是{v}。"],
            ("我现在用的是什么笔记本电脑？", "我以前用的是什么笔记本电脑？", "我最初用的是什么笔记本电脑？")),
    "城市": (["成都", "杭州", "深圳", "北京", "厦门"],
           "我住在{v}。",
           ["我搬到{v}住了。", "我现在住在{v}。", "又搬家了，现在住在{v}。", "我搬去{v}住了。"],
           ("我现在住在哪个城市？", "我以前住在哪个城市？", "我最初住在哪个城市？")),
    "预算": (["三万", "五万", "八万", "十万", "十二万"],
           "装修预算是{v}元。",
           ["装修预算改成{v}元了。", "装修预算现在是{v}元。", "装修预算又调整了，改为{v}元。", "装修预算换成{v}元了。"],
           ("装修预算现在是多少？", "装修预算以前是多少？", "装修预算最初是多少？")),
    "工作": (["腾讯的产品经理", "字节跳动的数据分析师", "阿里巴巴的工程师", "咖啡店的店长", "中学的语文老师"],
           "我的工作是{v}。",
           ["我跳槽了，现在的工作是{v}。", "我换了工作，现在是{v}。", "我的工作改成{v}了。", "我现在的工作是{v}。"],
           ("我现在的工作是什么？", "我以前做什么工作？", "我最初的工作是什么？")),
    "饮食": (["素食", "生酮饮食", "地中海饮食", "低碳水饮食", "清淡饮食"],
           "我平时的饮食是{v}。",
           ["我的饮食改成{v}了。", "我现在的饮食是{v}。", "饮食换成{v}了。", "我不再吃以前那种了，现在是{v}。"],
           ("我现在的饮食是什么？", "我以前的饮食是什么？", "我一开始的饮食是什么？")),
    "男朋友": (["小王", "小李", "阿明", "大伟", "小陈"],
            "我的男朋友叫{v}。",
            ["我现在的男朋友叫{v}。", "我换了男朋友，现在的男朋友叫{v}。", "男朋友现在是{v}了。", "我的男朋友变成{v}了。"],
            ("我现在的男朋友叫什么？", "我以前的男朋友叫什么？", "我最初的男朋友叫什么？")),
    "球队": (["广州队", "上海申花", "北京国安", "山东泰山", "成都蓉城"],
           "我最喜欢的球队是{v}。",
           ["我现在最喜欢的球队是{v}。", "我最喜欢的球队换成{v}了。", "最喜欢的球队改成{v}了。", "我如今最喜欢的球队是{v}。"],
           ("我现在最喜欢哪个球队？", "我以前最喜欢哪个球队？", "我最初最喜欢哪个球队？")),
    "手机": (["小米12", "华为Mate60", "iPhone 15", "OPPO Find X7", "vivo X100"],
           "我的手机是{v}。",
           ["我换了新手机，是{v}。", "我的手机现在是{v}。", "手机换成{v}了。", "我现在用的手机是{v}。"],
           ("我现在用什么手机？", "我以前用什么手机？", "我最初用的是什么手机？")),
}
# Distractors: other people's attributes (a different subject), another scope, unrelated facts.
EN_DISTRACTORS = [
    ("My sister's laptop is a Chromebook.", ""), ("My friend Priya moved to Toronto last month.", ""),
    ("My brother switched to a vegan diet.", ""), ("The office budget for snacks is now 200 dollars.", "work"),
    ("The team laptop pool now has ten MacBooks.", "work"), ("I have a cat called Miso.", ""),
    ("I had ramen for lunch with Dana.", ""), ("My mother's car is a Renault Clio.", ""),
    ("I'm reading a novel about lighthouses.", ""), ("Our neighbours got a new dog.", ""),
]
ZH_DISTRACTORS = [
    ("我姐姐的笔记本电脑是华硕的。", ""), ("我朋友小张搬到上海了。", ""), ("我妈妈现在吃素。", ""),
    ("公司的团建预算改成两万元了。", "work"), ("部门的测试手机现在是华为P60。", "work"), ("我养了一只猫，叫年糕。", ""),
    ("中午和同事吃了兰州拉面。", ""), ("我爸爸开的是大众朗逸。", ""), ("最近在看一本关于灯塔的小说。", ""),
    ("邻居家新养了一只狗。", ""),
]


def build(rng: random.Random) -> tuple[list[dict], list[dict]]:
    memories: list[dict] = []
    queries: list[dict] = []
    users = [(f"u{n:02d}", "en" if n <= 8 else "zh") for n in range(1, 15)]
    for user, lang in users:
        table = EN if lang == "en" else ZH
        attributes = rng.sample(sorted(table), 5)
        for attr in attributes:
            values, first, updates, asks = table[attr]
            changes = rng.randint(1, 4)
            chosen = rng.sample(values, changes + 1)
            age = rng.randint(200, 320)
            ids = []
            for i, value in enumerate(chosen):
                text = first if i == 0 else updates[(i - 1 + rng.randint(0, 3)) % len(updates)]
                mid = f"{user}-{attr}-{i}"
                ids.append(mid)
                memories.append({"id": mid, "user": user, "content": text.format(v=value), "type": "semantic",
                                 "age_days": age, "scope": ""})
                age -= rng.randint(14, 60)
            for kind, text, answer in (("now", asks[0], ids[-1]), ("before", asks[1], ids[-2]),
                                       ("first", asks[2], ids[0])):
                queries.append({"id": f"{user}-{attr}-{kind}", "user": user, "text": text, "lang": lang,
                                "kind": kind, "changes": changes, "relevant": [answer],
                                "half": "dev" if int(user[1:]) % 2 else "held_out"})
        distractors = EN_DISTRACTORS if lang == "en" else ZH_DISTRACTORS
        for j, (text, scope) in enumerate(rng.sample(distractors, 6)):
            memories.append({"id": f"{user}-d{j}", "user": user, "content": text, "type": rng.choice(
                ["semantic", "episodic"]), "age_days": rng.randint(1, 300), "scope": scope})
    return memories, queries


def main() -> None:
    memories, queries = build(random.Random(SEED))
    for name, rows in (("updates_memories.jsonl", memories), ("updates_queries.jsonl", queries)):
        (ROOT / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(memories)} memories, {len(queries)} queries")


if __name__ == "__main__":
    main()
