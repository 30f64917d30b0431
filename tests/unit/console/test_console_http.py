"""The console's small HTTP/1.1 server: parsing, limits, keep-alive and default headers, over real sockets."""

from __future__ import annotations

import asyncio

import pytest

from server.console.http import HttpError, HttpServer, Request, Response, body_length, make_request, parse_head


def test_parse_head_reads_the_request_line_and_lower_cases_header_names() -> None:
    method, target, version, headers = parse_head(b"GET /a%2Fb?x=1&x=2 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2")
    assert (method, target, version) == ("GET", "/a%2Fb?x=1&x=2", "HTTP/1.1")
    assert headers == {"host": "h", "x-a": "1, 2"}
    request = make_request(method, target, headers, b"", remote="r", scheme="http")
    assert request.path == "/a/b" and request.params("x") == ["1", "2"] and request.param("y", "d") == "d"


@pytest.mark.parametrize(("head", "status"), [
    (b"GET /", 400), (b"GET / HTTP/2.0", 505), (b"GET http://x/ HTTP/1.1", 400), (b"G(T / HTTP/1.1", 400),
    (b"GET / HTTP/1.1\r\nno-colon", 400), (b"GET / HTTP/1.1\r\n folded: x", 400),
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b", 400), (b"GET / HTTP/1.1\r\n" + b"A: b\r\n" * 101 + b"A: b", 431),
])
def test_malformed_heads_are_refused(head: bytes, status: int) -> None:
    with pytest.raises(HttpError) as err:
        parse_head(head)
    assert err.value.status == status


def test_bodies_only_by_bounded_content_length() -> None:
    assert body_length({}, max_body_bytes=10) == 0
    assert body_length({"content-length": "10"}, max_body_bytes=10) == 10
    for headers, status in (({"content-length": "11"}, 413), ({"content-length": "-1"}, 400),
                            ({"content-length": "1", "transfer-encoding": "chunked"}, 501)):
        with pytest.raises(HttpError) as err:
            body_length(headers, max_body_bytes=10)
        assert err.value.status == status
    with pytest.raises(HttpError):
        make_request("GET", "/%ff", {}, b"", remote="", scheme="http")


def test_cookies_parse_the_first_of_each_name() -> None:
    request = Request(method="GET", path="/", query={}, headers={"cookie": 'a=1; b="2"; a=3; junk'})
    assert request.cookies() == {"a": "1", "b": "2"}


async def _exchange(port: int, data: bytes, *, read_until_close: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = await asyncio.wait_for(reader.read(), 5) if read_until_close else b""
    writer.close()
    return out


def test_server_keeps_connections_alive_adds_default_headers_and_closes_on_errors() -> None:
    seen: list[Request] = []

    async def handler(request: Request) -> Response:
        seen.append(request)
        return Response(200, b'{"ok": true}', headers=[("X-Route", request.path)])

    async def main() -> None:
        server = HttpServer(handler, default_headers=[("X-Frame-Options", "DENY"), ("X-Route", "default")],
                            idle_timeout_s=0.5)
        port = await server.start("127.0.0.1", 0)
        try:
            two = await _exchange(port, b"GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
                                        b"POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                                        b"HEAD /three HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            assert two.count(b"HTTP/1.1 200 OK") == 3 and two.count(b'{"ok": true}') == 2   # HEAD: no body
            assert b"X-Frame-Options: DENY" in two and b"X-Route: /one" in two and b"X-Route: default" not in two
            assert [r.path for r in seen] == ["/one", "/two", "/three"] and seen[1].body == b"abc"
            put = await _exchange(port, b"PUT / HTTP/1.1\r\nHost: h\r\n\r\n")
            assert put.startswith(b"HTTP/1.1 405") and b"Connection: close" in put
            huge = await _exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
            assert huge.startswith(b"HTTP/1.1 431")
            partial = await _exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n")   # then idles past the timeout
            assert partial == b""
            assert len(seen) == 3
        finally:
            await server.stop()
        with pytest.raises(OSError):
            await _exchange(port, b"GET / HTTP/1.1\r\n\r\n")

    asyncio.run(main())
