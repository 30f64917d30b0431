"""With ``tls_cert`` set the console speaks HTTPS with the gRPC server's certificate: Secure cookies, HSTS,
and no plaintext."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from support import ADMIN_KEY, start_server


@pytest.fixture
def cert(tmp_path: Path) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "server.key", "-out", "server.pem"],
                   cwd=tmp_path, check=True, capture_output=True)
    return tmp_path


def test_console_serves_https_with_the_servers_certificate(tmp_path: Path, jvm: None, embedder, cert: Path) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, console_listen="127.0.0.1:0",
                           tls_cert=str(cert / "server.pem"), tls_key=str(cert / "server.key"))
    try:
        port = running.app.console_port
        context = ssl.create_default_context(cafile=str(cert / "server.pem"))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        conn.request("POST", "/api/login", body=json.dumps({"key": ADMIN_KEY}),
                     headers={"Content-Type": "application/json", "Origin": f"https://127.0.0.1:{port}"})
        reply = conn.getresponse()
        reply.read()
        assert reply.status == 200
        cookie = reply.getheader("Set-Cookie")
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert reply.getheader("Strict-Transport-Security") == "max-age=31536000"
        conn.close()
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            plain.request("GET", "/")
            plain.getresponse().read()
    finally:
        running.stop()
