"""Domain errors and the one table that maps them to gRPC status codes.

Nothing here imports grpc: each error names its status code, and the gRPC edge
(``server/grpc/interceptors.py``) turns the name into a ``grpc.StatusCode``. Messages of these errors are
written for clients; anything else that escapes becomes INTERNAL with a generic message.
"""

from __future__ import annotations

import errno


class EngramError(Exception):
    """Base of errors whose message is safe to show to a client."""

    code = "INTERNAL"


class InvalidArgument(EngramError):
    code = "INVALID_ARGUMENT"


class NotFound(EngramError):
    code = "NOT_FOUND"


class AlreadyExists(EngramError):
    code = "ALREADY_EXISTS"


class PermissionDenied(EngramError):
    code = "PERMISSION_DENIED"


class Unauthenticated(EngramError):
    code = "UNAUTHENTICATED"


class Overloaded(EngramError):
    code = "RESOURCE_EXHAUSTED"


class StorageFull(Overloaded):
    """The data directory's filesystem is full (ENOSPC / EDQUOT) or below the free-space watermark: the
    write was not applied; it can be retried once space returns (no restart needed)."""

    code = "RESOURCE_EXHAUSTED"


class NotReady(EngramError):
    code = "UNAVAILABLE"


class StoreUnavailable(NotReady):
    """The durable log's store (object storage) did not answer in time or failed transiently: nothing was
    acknowledged; retry. ``outcome_unknown``: a write may have landed (the log must be reloaded to know)."""

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown


class NotOwner(NotReady):
    """Another replica took the tenant over (its fence is in the log): this one may no longer append;
    retry reaches the new owner."""


class FailedPrecondition(EngramError):
    code = "FAILED_PRECONDITION"


class DeadlineExceeded(EngramError):
    code = "DEADLINE_EXCEEDED"


class Cancelled(EngramError):
    code = "CANCELLED"


class ConfigError(Exception):
    """Bad configuration: raised at startup, never reaches a client."""


class UnsafeObjectStore(ConfigError):
    """The object store does not honour conditional writes (If-None-Match / If-Match): fencing would be
    silently broken, so the server refuses to run on it."""


# The one table: domain error → gRPC status code name.
STATUS_CODE_BY_ERROR: dict[type[EngramError], str] = {
    cls: cls.code
    for cls in (InvalidArgument, NotFound, AlreadyExists, PermissionDenied, Unauthenticated,
                Overloaded, StorageFull, NotReady, DeadlineExceeded, Cancelled, FailedPrecondition)
}


def status_code_name(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        if cls in STATUS_CODE_BY_ERROR:
            return STATUS_CODE_BY_ERROR[cls]  # type: ignore[index]
    return "INTERNAL"


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")


def is_storage_full(exc: BaseException) -> bool:
    """A full filesystem, whichever layer raised it: an ``OSError`` with ENOSPC / EDQUOT, or a wrapped one
    (a Java ``IOException`` from Lucene carries the OS message), anywhere in its cause chain."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, StorageFull):
            return True
        if isinstance(seen, OSError) and seen.errno in _FULL_ERRNOS:
            return True
        if not isinstance(seen, OSError) and any(text in str(seen) for text in _FULL_TEXTS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def as_client_error(exc: BaseException) -> EngramError | None:
    """The client-safe error an unexpected exception stands for, if any: a full disk is an answer
    (RESOURCE_EXHAUSTED "storage full"), not an internal error."""
    if isinstance(exc, EngramError):
        return exc
    if is_storage_full(exc):
        return StorageFull("storage full: the data directory has no space left; the write was not applied "
                           "(retry once space is freed)")
    return None
