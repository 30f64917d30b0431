"""Shared fixtures: the JVM (once per process), the packaged embedder, a tiny cross-encoder, a server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def jvm() -> None:
    from server import lexical

    lexical.start(heap_mb=1024)


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    from server.app import load_embedder
    from server.config import load_config

    model = load_embedder(load_config(env={}), "cpu")
    model.warmup()
    return model


@pytest.fixture(scope="session")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from models.reranker import HFCrossEncoder
    from models.testing import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), seed=0)
    return HFCrossEncoder.load(path, device="cpu")


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder):  # type: ignore[no-untyped-def]
    """One server for a test module (models warm once per module, not once per test)."""
    from support import start_server

    running = start_server(tmp_path_factory.mktemp("server") / "data", embedder=embedder)
    yield running
    running.stop()


@pytest.fixture
def server(module_server):  # type: ignore[no-untyped-def]
    """The module's server, fresh for each test: the tenants a test made are deleted after it (a test that
    needs a server of its own, other config or a restart, starts one with support.start_server)."""
    yield module_server
    module_server.reset()


@pytest.fixture
def admin(server) -> Iterator:  # type: ignore[no-untyped-def]
    yield server.client()
