"""Logging setup for the server process: every record carries the request id of the RPC it belongs to.

The request id lives in a contextvar set by the edge interceptor; :class:`RequestIdFilter` copies it onto
each record (``-`` outside a request). ``log_format = "json"`` writes one JSON object per line.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


class RequestIdFilter(logging.Filter):
    def __init__(self, request_id: contextvars.ContextVar[str]) -> None:
        super().__init__()
        self._request_id = request_id

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = self._request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(*, level: str, fmt: str, request_id: contextvars.ContextVar[str],
                      handler: logging.Handler | None = None) -> logging.Handler:
    """Installs one handler on the root logger (replacing earlier ones) and returns it."""
    handler = handler or logging.StreamHandler()
    handler.addFilter(RequestIdFilter(request_id))
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
