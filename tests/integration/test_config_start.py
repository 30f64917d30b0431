"""A config file of the previous release, naming options that moved to [advanced], still starts the server: each
takes effect, with one warning per old name, and the server answers."""

from __future__ import annotations

import logging

import pytest
from support import start_server


def test_a_toml_with_old_option_names_starts_the_server_with_warnings(tmp_path, jvm, embedder,  # type: ignore[no-untyped-def]
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    toml = tmp_path / "engram.toml"
    toml.write_text("grace_s = 2.0\n[models]\ncpu_threads = 1\n[batching]\nsplit_above = 8\n"
                    "queue_capacity = 32\n[search]\ncandidates = 40\n[tenants]\ngc_tuning = false\n")
    with caplog.at_level(logging.WARNING, logger="server.config"):
        running = start_server(tmp_path / "data", embedder=embedder, toml_path=toml)
    try:
        config = running.app.config
        assert (config.grace_s, config.models.cpu_threads, config.batching.split_above,
                config.batching.queue_capacity, config.search.candidates, config.tenants.gc_tuning) == (
            2.0, 1, 8, 32, 40, False)
        warned = {r.getMessage().split()[2] for r in caplog.records if "is now advanced." in r.getMessage()}
        assert warned == {"grace_s", "models.cpu_threads", "batching.split_above",
                          "batching.queue_capacity", "search.candidates", "tenants.gc_tuning"}
        client = running.client()
        client.create_tenant("acme/old")
        client.write("acme/old", "The old config still starts the server.")
        assert client.search("acme/old", "old config").hits
    finally:
        running.stop()
