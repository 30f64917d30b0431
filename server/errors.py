"""Domain errors and the one table that maps them to gRPC status codes.

Nothing here imports grpc: each error names its status code, and the gRPC edge
(``server/grpc/interceptors.py``) turns the name into a ``grpc.StatusCode``. Messages of these errors are
written for clients; anything else that escapes becomes INTERNAL with a generic message.
"""

from __future__ import annotations


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


class NotReady(EngramError):
    code = "UNAVAILABLE"


class FailedPrecondition(EngramError):
    code = "FAILED_PRECONDITION"


class DeadlineExceeded(EngramError):
    code = "DEADLINE_EXCEEDED"


class Cancelled(EngramError):
    code = "CANCELLED"


class ConfigError(Exception):
    """Bad configuration: raised at startup, never reaches a client."""


# The one table: domain error → gRPC status code name.
STATUS_CODE_BY_ERROR: dict[type[EngramError], str] = {
    cls: cls.code
    for cls in (InvalidArgument, NotFound, AlreadyExists, PermissionDenied, Unauthenticated,
                Overloaded, NotReady, DeadlineExceeded, Cancelled, FailedPrecondition)
}


def status_code_name(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        if cls in STATUS_CODE_BY_ERROR:
            return STATUS_CODE_BY_ERROR[cls]  # type: ignore[index]
    return "INTERNAL"
