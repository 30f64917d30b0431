"""Fixtures shared by the hostile-input table and the fuzz test: one server per module, with the
tenants and memories of reliability.hostile, and a channel to it."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from support import RunningServer

from reliability.hostile import start_hostile_server


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder) -> Iterator[RunningServer]:
    running = start_hostile_server(tmp_path_factory.mktemp("hostile") / "data", embedder=embedder)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def channel(hostile_server: RunningServer) -> Iterator[grpc.Channel]:
    channel = grpc.insecure_channel(hostile_server.address)
    yield channel
    channel.close()
