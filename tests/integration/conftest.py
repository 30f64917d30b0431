"""Fixtures of the integration tests that run engram on Ray (tests/cluster_support.py): a module's own fixture of
the same name takes precedence."""

from cluster_support import ray_cluster, weed  # noqa: F401 - fixtures
