"""The object-store wrapper's outcomes against moto: create-once and compare-and-swap, a lost answer resolved
by reading back, a request that never left, AWS's 409, and the start-up self-check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.errors import ConfigError, StoreUnavailable, UnsafeObjectStore
from server.store.s3 import Taken, verify_conditional_writes
from tests.unit.store.s3_support import mocked, new_store


@pytest.fixture(autouse=True)
def _moto() -> Iterator[None]:
    with mocked():
        yield


def test_create_once_and_compare_and_swap() -> None:
    store, _ = new_store()
    first = store.create("k", b"one")
    with pytest.raises(Taken) as taken:
        store.create("k", b"two")
    assert taken.value.current is not None and taken.value.current.body == b"one"
    second = store.swap("k", b"three", etag=first)
    with pytest.raises(Taken):
        store.swap("k", b"four", etag=first)            # stale ETag
    with pytest.raises(Taken):
        store.swap("missing", b"five", etag=second)     # If-Match on no object
    assert store.get("k").body == b"three"              # type: ignore[union-attr]
    assert store.get("missing") is None


def test_a_lost_answer_is_resolved_by_reading_back_not_by_retrying_blindly() -> None:
    store, faults = new_store()
    faults.lost = 1                       # the PUT lands; the client sees a read timeout
    etag = store.create("k", b"mine")     # the retry meets 412, reads back its own bytes: it landed
    assert faults.puts_landed == 1 and store.get("k").etag == etag  # type: ignore[union-attr]
    other, other_faults = new_store()
    other_faults.lost = 1
    store.create("j", b"theirs")
    with pytest.raises(Taken):            # a 412 on someone else's bytes is a loss, lost answer or not
        other.create("j", b"not theirs")


def test_a_request_that_never_left_is_a_clean_unavailable() -> None:
    store, faults = new_store(attempts=2)
    faults.refused = 2
    with pytest.raises(StoreUnavailable) as exc:
        store.create("k", b"x")
    assert not exc.value.outcome_unknown and store.get("k") is None
    assert store.create("k", b"x")        # resumes once the endpoint answers


def test_an_unknown_outcome_is_reported_as_unknown() -> None:
    store, faults = new_store(attempts=2)
    faults.lost, faults.dark = 1, True    # the PUT landed, then the endpoint went dark: nothing can tell
    with pytest.raises(StoreUnavailable) as exc:
        store.create("k", b"x")
    assert exc.value.outcome_unknown
    faults.dark = False
    assert store.get("k").body == b"x"    # type: ignore[union-attr]


def test_conditional_request_conflict_409_is_retried() -> None:
    store, faults = new_store(attempts=3)
    faults.conflicts = 2
    assert store.create("k", b"x") and faults.conflicts == 0 and faults.puts_landed == 1
    faults.conflicts = 3                   # still conflicting after every try: resolved by reading back
    with pytest.raises(Taken):
        store.create("k", b"y")


def test_self_check_passes_on_a_store_that_honours_conditions_and_refuses_one_that_ignores_them() -> None:
    store, faults = new_store()
    verify_conditional_writes(store)
    assert store.keys("_selfcheck/") == []          # the scratch key is gone
    faults.strip = True
    with pytest.raises(UnsafeObjectStore, match="ignores If-None-Match"):
        verify_conditional_writes(store)


def test_list_pages_in_key_order() -> None:
    store, _ = new_store(prefix="p/")
    for i in (3, 1, 2):
        store.create(f"a/{i:020d}", b"x")
    store.create("b/1", b"x")
    assert store.keys("a/") == [f"a/{i:020d}" for i in (1, 2, 3)]
    assert store.keys("a/", start_after=f"a/{1:020d}") == [f"a/{i:020d}" for i in (2, 3)]


def test_a_missing_bucket_is_a_clear_error_at_start_and_unavailable_later() -> None:
    store, _ = new_store()
    store.bucket = "no-such-bucket"
    with pytest.raises(ConfigError, match="cannot be used.*NoSuchBucket"):
        verify_conditional_writes(store)
    with pytest.raises(StoreUnavailable, match="refused") as exc:
        store.create("k", b"x")
    assert not exc.value.outcome_unknown
    with pytest.raises(StoreUnavailable, match="refused"):
        store.keys("")


def test_small_puts_send_their_body_at_once_large_ones_wait_for_continue() -> None:
    from botocore.awsrequest import AWSRequest

    from server.store.s3 import EXPECT_CONTINUE_FROM_BYTES, _send_small_bodies_at_once

    def sent(size: int) -> dict[str, str]:
        request = AWSRequest(method="PUT", url="http://127.0.0.1:1/b/k", data=b"x" * size,
                             headers={"Expect": "100-continue", "Content-Length": str(size)}).prepare()
        assert _send_small_bodies_at_once(request) is None     # botocore still sends it
        return dict(request.headers)

    assert "Expect" not in sent(4096)
    assert sent(EXPECT_CONTINUE_FROM_BYTES)["Expect"] == "100-continue"
