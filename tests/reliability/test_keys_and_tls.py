"""Transport and keys through the real server: TLS and mutual TLS by config, key revocation and rotation
by admin RPC (durable across a restart), prefix keys that cannot reach look-alike tenants."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest
from support import ADMIN_KEY, Client, start_server, status_of

from engram_proto.v1 import service_pb2 as spb

OK, DENIED, UNAUTH = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED


def _create_key(admin: Client, **scope: object) -> tuple[str, str]:
    request = spb.CreateKeyRequest(name="k", **scope)  # type: ignore[arg-type]
    reply = admin.admin.CreateKey(request, metadata=admin.metadata)
    return reply.key_id, reply.secret


def test_revoked_key_stops_at_once_and_stays_revoked_after_restart(tmp_path: Path, jvm: None, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder)
    try:
        admin = running.client()
        admin.create_tenant("acme/a")
        key_id, secret = _create_key(admin, tenant_ids=["acme/a"])
        user = running.client(secret)
        assert status_of(lambda: user.write("acme/a", "before revocation")) == OK
        reply = admin.admin.RevokeKey(spb.RevokeKeyRequest(key_id=key_id), metadata=admin.metadata)
        assert reply.key_id == key_id
        assert status_of(lambda: user.write("acme/a", "after revocation")) == UNAUTH
        assert status_of(lambda: user.search("acme/a", "revocation")) == UNAUTH
        # Idempotent; and a revoked key cannot be brought back by rotating it.
        assert status_of(lambda: admin.admin.RevokeKey(spb.RevokeKeyRequest(key_id=key_id),
                                                       metadata=admin.metadata)) == OK
        assert status_of(lambda: admin.admin.RotateKey(spb.RotateKeyRequest(key_id=key_id),
                                                       metadata=admin.metadata)) == grpc.StatusCode.NOT_FOUND
    finally:
        running.stop()
    running = start_server(tmp_path / "data", embedder=embedder)
    try:
        assert status_of(lambda: running.client(secret).search("acme/a", "revocation")) == UNAUTH
        contents = [m.content for m in running.client().list_all("acme/a")]
        assert contents == ["before revocation"]
    finally:
        running.stop()


def test_rotation_keeps_id_and_scope_and_kills_the_old_secret(server, admin) -> None:
    admin.create_tenant("acme/a")
    admin.create_tenant("acme2")
    key_id, old = _create_key(admin, tenant_prefixes=["acme/"])
    reply = admin.admin.RotateKey(spb.RotateKeyRequest(key_id=key_id), metadata=admin.metadata)
    assert reply.key_id == key_id and reply.secret != old and reply.secret.startswith(f"egk_{key_id}_")
    assert status_of(lambda: server.client(old).write("acme/a", "old secret")) == UNAUTH
    new = server.client(reply.secret)
    assert status_of(lambda: new.write("acme/a", "new secret")) == OK
    assert status_of(lambda: new.write("acme2", "look-alike tenant")) == DENIED  # same scope, no wider
    assert [m.content for m in admin.list_all("acme/a")] == ["new secret"]
    assert admin.list_all("acme2") == []


def test_key_admin_rpcs_need_an_admin_key_and_a_real_key_id(server, admin) -> None:
    admin.create_tenant("acme/a")
    key_id, secret = _create_key(admin, tenant_ids=["acme/a"])
    user = server.client(secret)
    for rpc, cls in ((user.admin.RevokeKey, spb.RevokeKeyRequest), (user.admin.RotateKey, spb.RotateKeyRequest)):
        assert status_of(lambda: rpc(cls(key_id=key_id), metadata=user.metadata)) == DENIED
    for rpc, cls in ((admin.admin.RevokeKey, spb.RevokeKeyRequest), (admin.admin.RotateKey, spb.RotateKeyRequest)):
        for bad, code in (("", grpc.StatusCode.INVALID_ARGUMENT), ("not-a-key", grpc.StatusCode.INVALID_ARGUMENT),
                          ("0000000000000000", grpc.StatusCode.INVALID_ARGUMENT),   # bootstrap admin: config only
                          ("0123456789abcdef", grpc.StatusCode.NOT_FOUND)):
            assert status_of(lambda: rpc(cls(key_id=bad), metadata=admin.metadata)) == code, (cls, bad)
    assert status_of(lambda: user.write("acme/a", "still works")) == OK
    assert status_of(lambda: admin.list_all("acme/a")) == OK  # the admin key still works too


def test_prefix_must_end_with_a_slash_so_acme_cannot_cover_acme2(server, admin) -> None:
    for prefix in ("acme", "a/b", "acme//"):
        assert status_of(lambda: _create_key(admin, tenant_prefixes=[prefix])) == grpc.StatusCode.INVALID_ARGUMENT


# -- TLS ------------------------------------------------------------------------------------------------
def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server cert for 127.0.0.1/localhost and a client cert, all signed by the CA; plus a rogue CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "rogue"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=engram test {ca}",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, ca in (("server", "ca"), ("client", "ca"), ("rogue-client", "rogue")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        ext = "server.ext" if name == "server" else "client.ext"
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                 "-days", "2", "-extfile", ext, "-out", f"{name}.pem", cwd=d)
    return d


def _tls_client(address: str, certs: Path, client: str | None) -> Client:
    chain = (certs / f"{client}.pem").read_bytes() if client else None
    key = (certs / f"{client}.key").read_bytes() if client else None
    creds = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), private_key=key, certificate_chain=chain)
    return Client(grpc.secure_channel(address, creds), ADMIN_KEY)


def _info(client: Client) -> grpc.StatusCode:
    return status_of(lambda: client.memory.Info(spb.InfoRequest(), metadata=client.metadata, timeout=10))


def test_tls_by_config_refuses_plaintext(tmp_path: Path, jvm: None, embedder, certs: Path) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, tls_cert=str(certs / "server.pem"),
                           tls_key=str(certs / "server.key"))
    try:
        assert _info(_tls_client(running.address, certs, None)) == OK
        plain = Client(grpc.insecure_channel(running.address), ADMIN_KEY)
        assert _info(plain) == grpc.StatusCode.UNAVAILABLE
    finally:
        running.stop()


def test_mutual_tls_requires_a_client_cert_signed_by_the_configured_ca(tmp_path: Path, jvm: None, embedder,
                                                                       certs: Path) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, tls_cert=str(certs / "server.pem"),
                           tls_key=str(certs / "server.key"), tls_client_ca=str(certs / "ca.pem"))
    try:
        assert _info(_tls_client(running.address, certs, "client")) == OK
        assert _info(_tls_client(running.address, certs, None)) == grpc.StatusCode.UNAVAILABLE
        assert _info(_tls_client(running.address, certs, "rogue-client")) == grpc.StatusCode.UNAVAILABLE
        # mTLS authenticates the transport only: the bearer key is still required.
        anonymous = _tls_client(running.address, certs, "client")
        anonymous.metadata = []
        assert _info(anonymous) == UNAUTH
    finally:
        running.stop()


def test_tls_config_is_validated_at_startup(tmp_path: Path) -> None:
    from server.config import load_config
    from server.errors import ConfigError
    from server.grpc.server import server_credentials

    with pytest.raises(ConfigError):
        load_config(env={"ENGRAM_TLS_CERT": "/x.pem"})
    with pytest.raises(ConfigError):
        load_config(env={"ENGRAM_TLS_CLIENT_CA": "/ca.pem"})
    with pytest.raises(ConfigError):
        server_credentials(cert=str(tmp_path / "missing.pem"), key=str(tmp_path / "missing.key"), client_ca="")
