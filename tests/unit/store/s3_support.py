"""Object-store helpers for the store tests: moto buckets, clients, and faults injected into a real boto3
client's request cycle (the request reaches the server, or not; the answer reaches the client, or not)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from moto import mock_aws

from server.store.s3 import ObjectStore, make_client

BUCKET = "engram-test"


@dataclass
class _Http:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Faults:
    """Per client: the next ``lost`` PutObjects land but their answers are lost (a read timeout); the next
    ``refused`` PutObjects never leave (connection refused); ``dark``: every request after a PUT landed
    fails too (the endpoint went away); ``conflicts``: the next PutObjects are answered 409
    ConditionalRequestConflict (AWS, a concurrent conditional write) before being sent; ``strip``: the
    conditions are removed (a server that ignores them)."""

    lost: int = 0
    refused: int = 0
    conflicts: int = 0
    dark: bool = False
    strip: bool = False
    puts_landed: int = 0

    def install(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-parameter-build.s3.PutObject", self._params)
        events.register("before-call.s3", self._before)
        events.register("after-call.s3.PutObject", self._after)

    def _params(self, params: dict[str, Any], **_: Any) -> None:
        if self.strip:
            params.pop("IfNoneMatch", None)
            params.pop("IfMatch", None)

    def _before(self, model: Any, **_: Any) -> Any:
        if self.dark and model.name != "PutObject":
            raise EndpointConnectionError(endpoint_url="http://dark")
        if model.name != "PutObject":
            return None
        if self.refused:
            self.refused -= 1
            raise EndpointConnectionError(endpoint_url="http://refused")
        if self.dark and not self.lost:
            raise EndpointConnectionError(endpoint_url="http://dark")
        if self.conflicts:
            self.conflicts -= 1
            return _Http(409), {"Error": {"Code": "ConditionalRequestConflict", "Message": "concurrent"},
                                "ResponseMetadata": {"HTTPStatusCode": 409}}
        return None

    def _after(self, http_response: Any, **_: Any) -> None:
        if http_response.status_code == 200:
            self.puts_landed += 1
        if self.lost:
            self.lost -= 1
            raise ReadTimeoutError(endpoint_url="http://lost")


def new_store(*, prefix: str = "", attempts: int = 3) -> tuple[ObjectStore, Faults]:
    """A store on its own client (inside ``mocked()``), with its own faults."""
    client = make_client(endpoint="", region="us-east-1", access_key="test", secret_key="test", timeout_s=2.0)
    faults = Faults()
    faults.install(client)
    return ObjectStore(client, bucket=BUCKET, prefix=prefix, attempts=attempts, backoff_s=0.0), faults


@contextmanager
def mocked() -> Iterator[None]:
    with mock_aws():
        make_client(endpoint="", region="us-east-1", access_key="test", secret_key="test",
                    timeout_s=2.0).create_bucket(Bucket=BUCKET)
        yield
