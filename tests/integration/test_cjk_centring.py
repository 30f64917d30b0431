"""A Chinese question whose answer was written in English, through the real server with the default embedder
(multilingual-e5-small): centred (search.centre_cjk, the default) the English memory ranks first; uncentred, e5
ranks the Chinese memories that share the question's language above it (README "Quality")."""

from __future__ import annotations

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb

T = "acme/li"
ANSWER = "My car is a blue 2019 Toyota Corolla; its next service is due in March."
CHINESE = [
    "我周末喜欢去公园跑步，一般跑五公里。",
    "我家的猫叫小白，今年三岁。",
    "我每天早上喝一杯豆浆，不加糖。",
    "女儿在学钢琴，每周六上午上课。",
    "我对海鲜过敏，吃饭时要注意。",
    "公司的年会定在十二月二十日。",
    "我最喜欢的作家是余华。",
    "下个月要去北京出差三天。",
]
QUESTION = "我的车是什么车型，什么时候保养？"


@pytest.fixture(scope="module", params=[True, False], ids=["centred", "uncentred"])
def served(request, tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("centring") / "data", embedder=embedder,
                           search={"centre_cjk": request.param})
    client = running.client()
    client.create_tenant(T)
    client.write(T, *[pb.MemoryInput(content=c, type=pb.MEMORY_TYPE_SEMANTIC) for c in [*CHINESE, ANSWER]])
    yield request.param, client
    running.stop()


def test_a_chinese_question_finds_its_english_answer_first_only_when_centred(served) -> None:  # type: ignore[no-untyped-def]
    centred, client = served
    dense = client.contents(T, QUESTION, top_k=3, dense_only=True)
    served_order = client.contents(T, QUESTION, top_k=3)
    if centred:
        assert dense[0] == ANSWER and served_order[0] == ANSWER
    else:
        assert ANSWER not in dense[:2] and served_order[0] != ANSWER


def test_an_english_question_is_not_centred(served) -> None:  # type: ignore[no-untyped-def]
    """The same English query gets the same scores either way (only CJK queries are centred)."""
    _, client = served
    hits = client.search(T, "what car do I drive?", top_k=1, dense_only=True).hits
    assert hits[0].memory.content == ANSWER
    assert hits[0].breakdown.dense_score == pytest.approx(0.0, abs=1.0)   # a cosine
