"""Console login sessions, held in this process's memory only.

A login presents an engram key once; the browser gets an opaque random session id in an HttpOnly,
SameSite=Strict cookie and a CSRF token in the login reply (kept in the page's memory, sent back as a
header on every state-changing request). The key itself stays here, never in a cookie, a URL or browser
storage, and is authenticated again by the catalog on every request, so a revoked or rotated key stops
working in the console at once, exactly as over gRPC. Sessions end on logout, after ``idle_s`` without a
request, after ``max_age_s`` in all, and with the process.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from server.domain import KeyScope
from server.errors import Overloaded, Unauthenticated

MAX_KEY_CHARS = 512


@dataclass
class Session:
    sid: str
    key: str
    csrf: str
    created_s: float
    seen_s: float


class Sessions:
    def __init__(self, *, authenticate: Callable[[str], KeyScope], idle_s: float = 1800.0,
                 max_age_s: float = 12 * 3600.0, max_sessions: int = 1024, max_failures: int = 10,
                 failure_window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._authenticate = authenticate
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self._max_sessions = max_sessions
        self._max_failures = max_failures
        self._failure_window_s = failure_window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._failures: dict[str, deque[float]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def login(self, key: str, *, remote: str) -> tuple[Session, KeyScope]:
        """A new session for ``key``; Unauthenticated for a bad key, Overloaded after too many from ``remote``."""
        now = self._clock()
        with self._lock:
            recent = self._failures.setdefault(remote, deque())
            while recent and recent[0] < now - self._failure_window_s:
                recent.popleft()
            if len(recent) >= self._max_failures:
                raise Overloaded("too many failed logins from this address; wait a minute")
        try:
            if not key or len(key) > MAX_KEY_CHARS:
                raise Unauthenticated("invalid or revoked key")
            scope = self._authenticate(key)
        except Unauthenticated:
            with self._lock:
                self._failures.setdefault(remote, deque()).append(now)
            raise
        session = Session(sid=secrets.token_urlsafe(32), key=key, csrf=secrets.token_urlsafe(32), created_s=now,
                          seen_s=now)
        with self._lock:
            self._failures.pop(remote, None)
            self._expire(now)
            while len(self._sessions) >= self._max_sessions:   # the oldest goes first
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[session.sid] = session
        return session, scope

    def resolve(self, sid: str) -> tuple[Session, KeyScope]:
        """The live session for a cookie value and its key's scope now; Unauthenticated otherwise."""
        now = self._clock()
        with self._lock:
            session = self._sessions.get(sid) if sid else None
            if session is not None and self._expired(session, now):
                del self._sessions[sid]
                session = None
            if session is None:
                raise Unauthenticated("not logged in (or the session expired)")
            session.seen_s = now
        try:
            return session, self._authenticate(session.key)
        except Unauthenticated:
            self.logout(sid)
            raise

    def logout(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(session: Session, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(session.csrf.encode(), presented.encode())

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.seen_s > self.idle_s or now - session.created_s > self.max_age_s

    def _expire(self, now: float) -> None:
        for sid in [s.sid for s in self._sessions.values() if self._expired(s, now)]:
            del self._sessions[sid]
