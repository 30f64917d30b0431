"""engram's Python SDK: needs only grpcio, protobuf and the generated stubs in ``engram_proto``.

``EngramClient`` blocks; ``AsyncEngramClient`` is the same API on grpc.aio. Both send an idempotency key
with every Write, Delete, Forget and Confirm and retry UNAVAILABLE and DEADLINE_EXCEEDED with exponential
backoff (applied once: the server answers a retry from its record), put a deadline on every call, page through List, and offer the agent loop's two
helpers: ``recall`` before answering and ``remember`` after. ``turn`` (``engram_client.loop``) runs the whole
read-write loop in one call: recall → answer → remember → touch what was used. Any RPC in the proto is
also callable by name through ``client.call("Method", request)``.
"""

from __future__ import annotations

from engram_client._core import (NO_RETRY, Recall, RetryPolicy, conversation_inputs, memory_filter, memory_input,
                                 search_query, with_key)
from engram_client.aio import AsyncEngramClient
from engram_client.client import EngramClient
from engram_client.loop import Remembered, Turn, aend_turn, aturn, end_turn, turn

__all__ = ["NO_RETRY", "AsyncEngramClient", "EngramClient", "Recall", "Remembered", "RetryPolicy", "Turn",
           "aend_turn", "aturn", "conversation_inputs", "end_turn", "memory_filter", "memory_input", "search_query",
           "turn", "with_key"]
