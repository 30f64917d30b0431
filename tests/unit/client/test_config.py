"""Where the client finds the server: flags ← ENGRAM_ADDRESS / ENGRAM_KEY (else ENGRAM_ADMIN_KEY) /
ENGRAM_TIMEOUT_S ← defaults; the server's config skips exactly these variables."""

from __future__ import annotations

import pytest

from engram_client.config import ClientConfig, load_client_config
from server.config import CLIENT_VARIABLES, load_config


def test_flags_over_environment_over_defaults() -> None:
    assert load_client_config(env={}) == ClientConfig()
    env = {"ENGRAM_ADDRESS": "db:1", "ENGRAM_KEY": "k_env", "ENGRAM_TIMEOUT_S": "5"}
    assert load_client_config(env=env) == ClientConfig(address="db:1", key="k_env", timeout_s=5.0)
    assert load_client_config(env=env, address="x:2", key="k_flag", timeout_s=1.5) == ClientConfig(
        address="x:2", key="k_flag", timeout_s=1.5)


def test_admin_key_is_the_fallback_key() -> None:
    assert load_client_config(env={"ENGRAM_ADMIN_KEY": "k_admin"}).key == "k_admin"
    assert load_client_config(env={"ENGRAM_ADMIN_KEY": "k_admin", "ENGRAM_KEY": "k"}).key == "k"


@pytest.mark.parametrize(("env", "timeout", "message"), [
    ({"ENGRAM_TIMEOUT_S": "soon"}, None, "ENGRAM_TIMEOUT_S is not a number: 'soon'"),
    ({}, 0.0, "the client timeout must be > 0"),
    ({"ENGRAM_TIMEOUT_S": "-1"}, None, "the client timeout must be > 0"),
])
def test_a_bad_timeout_is_a_value_error(env: dict[str, str], timeout: float | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_client_config(env=env, timeout_s=timeout)


def test_the_server_skips_the_client_variables() -> None:
    """A shell that sets the client's variables can still start a server (they are no server options)."""
    env = {"ENGRAM_ADDRESS": "db:1", "ENGRAM_KEY": "k", "ENGRAM_TIMEOUT_S": "5"}
    assert set(env) == CLIENT_VARIABLES
    assert load_config(env=env) == load_config(env={})
