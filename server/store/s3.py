"""S3-compatible object storage for the tenant logs: a thin boto3 wrapper with AWS semantics.

Writes that must not be lost or doubled are conditional: :meth:`ObjectStore.create` (``If-None-Match: *``,
create-once) and :meth:`ObjectStore.swap` (``If-Match: <etag>``, compare-and-swap; or create-once when there
is no etag). Their outcome is one of three, decided by what the store says, never guessed:

* it landed: the new ETag is returned;
* another body holds the key (412 PreconditionFailed, read back: not our bytes): :class:`Taken`;
* unknown after every try (timeouts, a closed connection: the PUT may have landed, and a read-back could
  not tell): :class:`server.errors.StoreUnavailable` with ``outcome_unknown``. When no try ever reached the
  server (connection refused) the outcome is known: nothing landed, ``outcome_unknown`` is False.

A 412 is always resolved by reading the key back: when it holds our exact bytes, an earlier try whose
answer was lost landed (bodies carry a nonce, so another writer's never compare equal). 409
ConditionalRequestConflict (AWS: a concurrent conditional write to the key) and transient errors (5xx,
throttling, timeouts) are retried with the same body, which is safe for a conditional write.

:func:`verify_conditional_writes` is the start-up self-check: some S3-compatible servers (the JuiceFS
gateway) accept the headers and ignore them, which would silently break the fence.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError

from server.errors import ConfigError, StoreUnavailable, UnsafeObjectStore

log = logging.getLogger(__name__)

_TRANSIENT_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling",
                              "ThrottlingException", "RequestTimeTooSkewed", "503", "500"})
_NOT_SENT = (EndpointConnectionError, ConnectTimeoutError)   # the request never reached the server


@dataclass(frozen=True)
class Blob:
    body: bytes
    etag: str


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    modified_s: float


class Taken(Exception):
    """A conditional write lost: the key holds another body (``current``; None when a swap found no key)."""

    def __init__(self, key: str, current: Blob | None) -> None:
        super().__init__(f"{key}: precondition failed")
        self.key = key
        self.current = current


# botocore asks every PutObject to wait for "100 Continue" before it sends the body: one more round trip (and a
# pass through the server's request handling) before the data leaves. Worth it for a large body the server may
# refuse; a group commit's segment is a few KB, and a Write waits for its PUT.
EXPECT_CONTINUE_FROM_BYTES = 1 << 20


def make_client(*, endpoint: str, region: str, access_key: str, secret_key: str, timeout_s: float) -> Any:
    """A boto3 S3 client without botocore's own retries (this module retries, knowing which are safe), whose
    PUTs of small bodies send them at once (no ``Expect: 100-continue``)."""
    config = Config(region_name=region, connect_timeout=timeout_s, read_timeout=timeout_s,
                    retries={"max_attempts": 1, "mode": "standard"}, s3={"addressing_style": "path"})
    client = boto3.client("s3", endpoint_url=endpoint or None, aws_access_key_id=access_key or None,
                          aws_secret_access_key=secret_key or None, config=config)
    client.meta.events.register("before-send.s3.PutObject", _send_small_bodies_at_once)
    return client


def _send_small_bodies_at_once(request: Any, **_: Any) -> None:
    """Drops ``Expect: 100-continue`` from a PUT whose body is under EXPECT_CONTINUE_FROM_BYTES (the header is
    not signed, so the request stays valid); returns None so that botocore sends the request itself."""
    if "Expect" in request.headers and int(request.headers.get("Content-Length") or 0) < EXPECT_CONTINUE_FROM_BYTES:
        del request.headers["Expect"]


def _status(exc: ClientError) -> tuple[int, str]:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)), str(
        exc.response.get("Error", {}).get("Code", ""))


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, BotoCoreError):
        return True    # connection refused / reset, timeouts, a response cut short
    if isinstance(exc, ClientError):
        status, code = _status(exc)
        return status >= 500 or code in _TRANSIENT_CODES
    return False


class ObjectStore:
    """One bucket and key prefix. Thread-safe (boto3 clients are)."""

    def __init__(self, client: Any, *, bucket: str, prefix: str = "", attempts: int = 4,
                 backoff_s: float = 0.05) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _pause(self, attempt: int) -> None:
        time.sleep(min(1.0, self.backoff_s * 2 ** attempt))

    def _retry(self, what: str, key: str, call: Any) -> Any:
        """Runs an idempotent request (read, list, delete), retrying transient errors."""
        for attempt in range(self.attempts):
            try:
                return call()
            except (BotoCoreError, ClientError) as exc:
                if not _transient(exc) or attempt == self.attempts - 1:
                    state = "unavailable" if _transient(exc) else "refused the request"
                    raise StoreUnavailable(f"object store {state} ({what} {key}): {exc}") from exc
                log.info("object store: %s %s failed (%s); retrying", what, key, exc)
                self._pause(attempt)
        raise AssertionError("unreachable")

    # -- reads --------------------------------------------------------------------------------------
    def get(self, key: str) -> Blob | None:
        def call() -> Blob | None:
            try:
                reply = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as exc:
                status, code = _status(exc)
                if status == 404 or code in ("NoSuchKey", "404"):
                    return None
                raise
            return Blob(body=reply["Body"].read(), etag=reply["ETag"])
        return self._retry("GET", key, call)  # type: ignore[no-any-return]

    def keys(self, prefix: str, *, start_after: str = "") -> list[str]:
        """Every key under ``prefix`` after ``start_after`` (without the store's prefix), in key order."""
        return [item.key for item in self.listing(prefix, start_after=start_after)]

    def listing(self, prefix: str, *, start_after: str = "") -> list[Listed]:
        """Every object under ``prefix`` after ``start_after``, in key order, with its size and mtime."""
        return [Listed(key=item["Key"][len(self.prefix):], size=int(item.get("Size", 0)),
                       modified_s=item["LastModified"].timestamp() if "LastModified" in item else 0.0)
                for page in self._pages(prefix, start_after) for item in page.get("Contents", ())]

    def _pages(self, prefix: str, start_after: str) -> Iterator[Mapping[str, Any]]:
        token = ""
        while True:
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._key(prefix)}
            if token:
                args["ContinuationToken"] = token
            elif start_after:
                args["StartAfter"] = self._key(start_after)
            page = self._retry("LIST", prefix, lambda a=args: self.client.list_objects_v2(**a))
            yield page
            token = page.get("NextContinuationToken", "")
            if not page.get("IsTruncated") or not token:
                return

    def delete(self, key: str) -> None:
        self._retry("DELETE", key, lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))

    def delete_many(self, keys: list[str]) -> int:
        """Deletes ``keys`` with multi-object deletes (1000 a request); returns how many the store confirmed."""
        done = 0
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": self._key(k)} for k in keys[start:start + 1000]]
            reply = self._retry("DELETE", f"{len(chunk)} keys", lambda c=chunk: self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": c, "Quiet": True}))
            errors = reply.get("Errors", ())
            for error in errors[:3]:
                log.warning("object store: could not delete %s (%s)", error.get("Key"), error.get("Code"))
            done += len(chunk) - len(errors)
        return done

    def put(self, key: str, body: bytes) -> None:
        """Writes ``key`` whatever it holds (idempotent: a retry writes the same body). For records one writer
        owns and readers only glance at (a replica's published figures), never for the logs."""
        self._retry("PUT", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body))

    # -- conditional writes -------------------------------------------------------------------------
    def create(self, key: str, body: bytes) -> str:
        """Creates ``key`` only if absent; returns its ETag. Raises :class:`Taken` or StoreUnavailable."""
        return self._conditional(key, body, {"IfNoneMatch": "*"})

    def swap(self, key: str, body: bytes, *, etag: str | None) -> str:
        """Replaces ``key`` only while it still has ``etag`` (creates it only if absent when ``etag`` is
        None); returns the new ETag. Raises :class:`Taken` or StoreUnavailable."""
        return self._conditional(key, body, {"IfMatch": etag} if etag else {"IfNoneMatch": "*"})

    def _conditional(self, key: str, body: bytes, condition: dict[str, str]) -> str:
        sent = False      # whether any try may have reached the server (then a lost answer may hide a landing)
        last: BaseException | None = None
        for attempt in range(self.attempts):
            try:
                reply = self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body, **condition)
                return str(reply["ETag"])
            except ClientError as exc:
                status, code = _status(exc)
                if status == 412 or code == "PreconditionFailed":
                    return self._resolve(key, body, sent=True, cause=exc)
                if status == 404 and "IfMatch" in condition:   # AWS: If-Match on no object is 404 NoSuchKey
                    if sent:     # an earlier try's answer was lost: it may have landed, then been deleted
                        raise StoreUnavailable(f"object store: the outcome of PUT {key} is unknown",
                                               outcome_unknown=True) from exc
                    raise Taken(key, None) from exc
                if status == 409 or code == "ConditionalRequestConflict":
                    log.info("object store: conditional PUT %s conflicted with a concurrent one (409); retrying", key)
                    sent, last = True, exc
                elif not _transient(exc):   # refused (403, 400, no bucket): this try wrote nothing
                    raise StoreUnavailable(f"object store refused PUT {key}: {exc}", outcome_unknown=sent) from exc
                else:
                    sent, last = True, exc
            except BotoCoreError as exc:
                sent, last = sent or not isinstance(exc, _NOT_SENT), exc
            log.info("object store: conditional PUT %s failed (%s); retrying", key, last)
            self._pause(attempt)
        if not sent:
            raise StoreUnavailable(f"object store unreachable (PUT {key}): {last}") from last
        return self._resolve(key, body, sent=True, cause=last)

    def _resolve(self, key: str, body: bytes, *, sent: bool, cause: BaseException | None) -> str:
        """After a 412, or tries whose answers were lost: reads the key back to learn what happened."""
        try:
            current = self.get(key)
        except StoreUnavailable as exc:
            raise StoreUnavailable(f"object store unavailable: the outcome of PUT {key} is unknown ({cause})",
                                   outcome_unknown=sent) from exc
        if current is not None and current.body == body:
            log.info("object store: PUT %s had landed (its answer was lost)", key)
            return current.etag
        if isinstance(cause, ClientError) and _status(cause)[0] == 412:
            raise Taken(key, current)
        if current is None:
            # The PUT may still be in flight somewhere: only a reload (replay + fence) can settle it.
            raise StoreUnavailable(f"object store unavailable: the outcome of PUT {key} is unknown ({cause})",
                                   outcome_unknown=sent)
        raise Taken(key, current)


def verify_conditional_writes(store: ObjectStore) -> None:
    """Checks on a scratch key that the endpoint rejects a second create-once and a stale If-Match, and
    accepts a current one; raises UnsafeObjectStore otherwise (StoreUnavailable when it cannot be reached)."""
    key = f"_selfcheck/{uuid.uuid4().hex}"
    where = f"{store.client.meta.endpoint_url} bucket {store.bucket!r}"
    try:
        first = store.create(key, b"first " + key.encode())
        try:
            store.create(key, b"second " + key.encode())
        except Taken:
            pass
        else:
            raise UnsafeObjectStore(f"object store {where} ignores If-None-Match: a second create-once of one key "
                                    "succeeded; fencing would be silently broken, refusing to run")
        current = store.swap(key, b"third " + key.encode(), etag=first)
        try:
            store.swap(key, b"fourth " + key.encode(), etag=first)
        except Taken:
            pass
        else:
            raise UnsafeObjectStore(f"object store {where} ignores If-Match: a compare-and-swap with a stale ETag "
                                    "succeeded; fencing would be silently broken, refusing to run")
        store.swap(key, b"fifth " + key.encode(), etag=current)
    except Taken as exc:
        raise UnsafeObjectStore(f"object store {where} rejected a valid conditional write ({exc})") from exc
    except StoreUnavailable as exc:
        raise ConfigError(f"object store {where} cannot be used: {exc}") from exc
    finally:
        try:
            store.delete(key)
        except (StoreUnavailable, ClientError, BotoCoreError):
            log.warning("object store: could not delete the self-check key %s", key)
    log.info("object store %s honours conditional writes (If-None-Match, If-Match)", where)
