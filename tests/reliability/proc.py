"""An engram server as a real subprocess (``python -m engram_cli serve``), for crash, signal and log tests.

The in-process server of ``tests/support.py`` cannot be SIGKILLed or SIGTERMed without killing pytest;
this one can. It shares the sync ``Client`` of ``tests/support.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support import ADMIN_KEY, Client

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_serving(address: str, *, timeout_s: float, proc: subprocess.Popen[bytes] | None = None,
                 credentials: grpc.ChannelCredentials | None = None, authority: str | None = None) -> None:
    """Polls grpc.health.v1 until the server says SERVING (or the process died, or time ran out)."""
    deadline = time.monotonic() + timeout_s
    options = [("grpc.ssl_target_name_override", authority)] if authority else []
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before serving")
        channel = (grpc.secure_channel(address, credentials, options=options) if credentials
                   else grpc.insecure_channel(address))
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        finally:
            channel.close()
        time.sleep(0.2)
    raise TimeoutError(f"server at {address} not serving after {timeout_s}s")


@dataclass
class ServerProcess:
    """One ``engram serve`` child. ``start`` blocks until health says SERVING."""

    data_dir: Path
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    channels: list[grpc.Channel] = field(default_factory=list)
    _log_file: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, timeout_s: float = 180.0, wait: bool = True) -> ServerProcess:
        env = {**os.environ, "ENGRAM_ADMIN_KEY": ADMIN_KEY, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_JVM_HEAP_MB": "512", "PYTHONUNBUFFERED": "1",
               "ENGRAM_MODELS__RERANKER": "",  # these tests are about durability, not ranking: no reranker
               **self.env}
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engram_cli", "serve", "--listen", self.address, "--data-dir", str(self.data_dir)],
            cwd=REPO, env=env, stdout=self._log_file, stderr=subprocess.STDOUT)
        if wait:
            wait_serving(self.address, timeout_s=timeout_s, proc=self.proc, **self._tls_args())
        return self

    def _tls_args(self) -> dict[str, object]:
        return {}

    def client(self, key: str = ADMIN_KEY) -> Client:
        channel = grpc.insecure_channel(self.address)
        self.channels.append(channel)
        return Client(channel, key)

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed beyond what was already fsynced."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self._reap(10.0)

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self._reap(timeout_s)

    def _reap(self, timeout_s: float) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        for channel in self.channels:
            channel.close()
        self.channels.clear()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.terminate()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")
