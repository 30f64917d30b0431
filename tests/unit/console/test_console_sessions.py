"""Console sessions: expiry, revocation, the failed-login throttle and the CSRF comparison."""

from __future__ import annotations

import pytest

from server.console.sessions import Sessions
from server.domain import KeyScope
from server.errors import Overloaded, Unauthenticated

SCOPE = KeyScope(key_id="k1", name="alice", tenant_ids=frozenset({"acme/alice"}), tenant_prefixes=(), admin=False)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(valid: set[str], clock: Clock, **options: float) -> Sessions:
    def authenticate(key: str) -> KeyScope:
        if key not in valid:
            raise Unauthenticated("invalid or revoked key")
        return SCOPE

    return Sessions(authenticate=authenticate, clock=clock, **options)  # type: ignore[arg-type]


def test_a_session_resolves_to_the_keys_scope_and_ends_at_logout() -> None:
    sessions = make({"good"}, Clock())
    session, scope = sessions.login("good", remote="1.2.3.4")
    assert scope == SCOPE and session.key == "good" and session.sid != session.csrf and len(session.sid) >= 40
    assert sessions.resolve(session.sid) == (session, SCOPE)
    sessions.logout(session.sid)
    with pytest.raises(Unauthenticated):
        sessions.resolve(session.sid)
    with pytest.raises(Unauthenticated):
        sessions.resolve("")


def test_idle_and_absolute_expiry() -> None:
    clock = Clock()
    sessions = make({"good"}, clock, idle_s=60, max_age_s=300)
    session, _ = sessions.login("good", remote="r")
    for _ in range(4):           # kept alive by use, up to the absolute limit
        clock.now += 59
        sessions.resolve(session.sid)
    clock.now += 59              # 295 s: still inside max_age
    sessions.resolve(session.sid)
    clock.now += 10              # 305 s: past max_age
    with pytest.raises(Unauthenticated):
        sessions.resolve(session.sid)
    idle, _ = sessions.login("good", remote="r")
    clock.now += 61
    with pytest.raises(Unauthenticated):
        sessions.resolve(idle.sid)


def test_a_key_revoked_after_login_ends_the_session() -> None:
    valid = {"good"}
    sessions = make(valid, Clock())
    session, _ = sessions.login("good", remote="r")
    valid.clear()
    with pytest.raises(Unauthenticated):
        sessions.resolve(session.sid)
    assert len(sessions) == 0


def test_failed_logins_are_throttled_per_address_for_a_window() -> None:
    clock = Clock()
    sessions = make({"good"}, clock, max_failures=3, failure_window_s=60)
    for _ in range(3):
        with pytest.raises(Unauthenticated):
            sessions.login("bad", remote="evil")
    with pytest.raises(Overloaded):
        sessions.login("good", remote="evil")        # even the right key, until the window passes
    sessions.login("good", remote="other")           # other addresses are not affected
    clock.now += 61
    sessions.login("good", remote="evil")
    with pytest.raises(Unauthenticated):
        sessions.login("x" * 10_000, remote="r")      # oversized keys are refused before the catalog


def test_oldest_session_goes_when_full_and_csrf_must_match() -> None:
    sessions = make({"good"}, Clock(), max_sessions=2)
    first, _ = sessions.login("good", remote="r")
    second, _ = sessions.login("good", remote="r")
    sessions.login("good", remote="r")
    with pytest.raises(Unauthenticated):
        sessions.resolve(first.sid)
    sessions.resolve(second.sid)
    assert Sessions.csrf_ok(second, second.csrf)
    assert not Sessions.csrf_ok(second, "") and not Sessions.csrf_ok(second, first.csrf)
