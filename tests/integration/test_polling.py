"""One capacity poll against loopback reporters: the URL, the request, every failure family."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from ome_routing.core.report import ReportError, parse_report
from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import (
    PollClient,
    PollFailure,
    PollResult,
    build_request,
    join_poll_url,
    request_for_url,
)

from .conftest import (
    LOCAL_NAME,
    UNRESOLVABLE,
    ConnectionHandler,
    Handler,
    LoopbackResolver,
    Reporter,
    a_report,
    read_request_head,
    seconds,
)

pytestmark = pytest.mark.timeout(20)

StartReporter = Callable[[Handler], Awaitable[Reporter]]
StartRaw = Callable[[ConnectionHandler], Awaitable[str]]


async def poll(
    client: PollClient, url: str, method: str = "GET", timeout: str = "2s"
) -> PollResult:
    return await client.poll(request_for_url(url, method), seconds(timeout))


def answering(body: bytes | str, status: int = 200, **headers: str) -> Handler:
    data = body.encode() if isinstance(body, str) else body

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, status=status, headers=headers)

    return handle


def reason_for(body: bytes) -> str:
    """The core's own reason for a body, which the poll must carry verbatim."""
    try:
        parse_report(body)
    except ReportError as err:
        return err.reason
    raise AssertionError(f"{body!r} is a valid report")


# --- the poll URL -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "path", "expected"),
    [
        pytest.param(
            "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com",
            "/capacity",
            "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com/capacity",
            id="per-service subdomain",
        ),
        pytest.param(
            "http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b",
            "/capacity",
            "http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b/capacity",
            id="shared host with a path prefix",
        ),
        pytest.param(
            "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com:8080",
            "/capacity",
            "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com:8080/capacity",
            id="Kubernetes Ingress, engine Service port",
        ),
        pytest.param("http://host:8080/", "/capacity", "http://host:8080/capacity", id="slash"),
        pytest.param(
            "https://llm.example.com/a/b/",
            "/capacity",
            "https://llm.example.com/a/b/capacity",
            id="endpoint with a trailing slash",
        ),
        pytest.param(
            "http://h/a/b", "/../capacity", "http://h/a/capacity", id="dot-dot segment cleaned"
        ),
        pytest.param("http://h/a", "/./capacity", "http://h/a/capacity", id="dot segment cleaned"),
        pytest.param(
            "http://h/a", "/capacity/", "http://h/a/capacity/", id="trailing slash of the path kept"
        ),
        pytest.param(
            "HTTP://LLM.Example.COM/Qwen",
            "/capacity",
            "http://llm.example.com/Qwen/capacity",
            id="scheme and host lower-cased, path kept",
        ),
        pytest.param("http://h/a#top", "/capacity", "http://h/a/capacity", id="fragment dropped"),
        pytest.param(
            "http://h/a?x=1", "/capacity", "http://h/a/capacity?x=1", id="query kept, as OME does"
        ),
    ],
)
def test_the_poll_url_is_the_endpoint_joined_with_the_path_as_ome_joins_them(
    endpoint: str, path: str, expected: str
) -> None:
    assert join_poll_url(endpoint, path) == expected
    assert str(build_request(endpoint, path, "GET").url) == expected


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ("", 'capacity target is invalid: endpoint URL "" must be absolute'),
        (
            "ftp://host",
            'capacity target is invalid: endpoint URL "ftp://host" must use HTTP or HTTPS',
        ),
        (
            "host:8080",
            'capacity target is invalid: endpoint URL "host:8080" must be absolute',
        ),
        (
            "llm.example.com",
            'capacity target is invalid: endpoint URL "llm.example.com" must be absolute',
        ),
        ("http://", 'capacity target is invalid: endpoint URL "http://" must be absolute'),
        ("http:llm", 'capacity target is invalid: endpoint URL "http:llm" must be absolute'),
        (
            "http://h:x",
            'capacity target is invalid: parse endpoint URL: parse "http://h:x": '
            'invalid port ":x" after host',
        ),
        (
            "http://h/%zz",
            'capacity target is invalid: parse endpoint URL: parse "http://h/%zz": '
            'invalid URL escape "%zz"',
        ),
        (
            "http://u:secret@h",
            'capacity target is invalid: endpoint "http://h" must not carry credentials',
        ),
    ],
)
def test_an_unusable_endpoint_is_an_invalid_target(endpoint: str, reason: str) -> None:
    with pytest.raises(PollFailure) as caught:
        build_request(endpoint, "/capacity", "GET")
    assert caught.value.reason == reason
    assert caught.value.outcome is Outcome.INVALID_REQUEST


def test_a_port_out_of_range_is_unreachable() -> None:
    """Go parses any port number and fails to dial it: the home is unreachable."""
    with pytest.raises(PollFailure) as caught:
        build_request("http://h:99999", "/capacity", "GET")
    assert caught.value.reason == "capacity endpoint unreachable: address 99999: invalid port"
    assert caught.value.outcome is Outcome.UNREACHABLE


@pytest.mark.parametrize("method", ["HEAD", "PUT", "get", ""])
def test_a_method_other_than_get_or_post_cannot_be_built(method: str) -> None:
    with pytest.raises(PollFailure) as caught:
        build_request("http://h", "/capacity", method)
    assert (
        caught.value.reason
        == f'capacity request could not be built: method "{method}" is not GET or POST'
    )


# --- success and the request's shape --------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_valid_report_gives_a_reading(
    client: PollClient, reporter: StartReporter, method: str
) -> None:
    server = await reporter(answering(json.dumps(a_report(servable=3))))
    result = await poll(client, server.url(), method)
    assert result.outcome is Outcome.OK
    assert result.reason is None
    assert result.reading is not None and result.reading.servable == 3
    request = server.requests[0]
    assert request.method == method
    assert request.path == "/capacity"
    assert request.content_length in (None, 0)


async def test_a_poll_sends_no_credentials_and_keeps_no_cookies(
    client: PollClient, reporter: StartReporter
) -> None:
    async def set_cookie(request: web.Request) -> web.StreamResponse:
        response = web.json_response(a_report())
        response.set_cookie("session", "abc", path="/")
        return response

    server = await reporter(set_cookie)
    for _ in range(2):
        assert (await poll(client, server.url())).outcome is Outcome.OK
    for request in server.requests:
        assert "Cookie" not in request.headers
        assert "Authorization" not in request.headers
        # the body is wanted as it is: the observer never decompresses
        assert request.headers["Accept-Encoding"] == "identity"


async def test_a_poll_ignores_proxy_and_netrc_settings_in_the_environment(
    reporter: StartReporter,
    raw_server: StartRaw,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    proxied: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        proxied.append(await read_request_head(reader))
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    proxy_url = await raw_server(proxy)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login admin password secret\n")
    netrc.chmod(0o600)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("NETRC", str(netrc))
    from ome_routing.observer.budget import RequestBudget

    server = await reporter(answering(json.dumps(a_report())))
    async with PollClient(RequestBudget(2), 65536) as fresh_client:
        result = await poll(fresh_client, server.url())
    assert result.outcome is Outcome.OK
    assert proxied == []
    assert len(server.requests) == 1
    assert "Authorization" not in server.requests[0].headers


async def test_a_name_is_resolved_by_the_injected_resolver(
    client: PollClient, reporter: StartReporter, resolver: LoopbackResolver
) -> None:
    server = await reporter(answering(json.dumps(a_report())))
    port = server.base.rsplit(":", 1)[1]
    result = await poll(client, f"http://{LOCAL_NAME}:{port}/capacity")
    assert result.outcome is Outcome.OK
    assert server.requests[0].host == f"{LOCAL_NAME}:{port}"


# --- the status --------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 401, 403, 500, 503, 204, 201])
async def test_any_status_but_200_fails_with_the_status(
    client: PollClient, reporter: StartReporter, status: int
) -> None:
    server = await reporter(answering(json.dumps(a_report()), status=status))
    result = await poll(client, server.url())
    assert result.reason == f"capacity endpoint returned HTTP {status}"
    assert result.outcome is Outcome.HTTP_STATUS


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_redirect_to_a_valid_report_is_not_followed(
    client: PollClient, reporter: StartReporter, status: int
) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/elsewhere":
            return web.json_response(a_report())
        return web.Response(status=status, headers={"Location": "/elsewhere"})

    server = await reporter(handle)
    result = await poll(client, server.url())
    assert result.reason == f"capacity endpoint returned HTTP {status}"
    assert [r.path for r in server.requests] == ["/capacity"]


# --- the body ----------------------------------------------------------------------

INVALID_BODIES = [
    pytest.param(b"", id="empty body"),
    pytest.param(b"   \n", id="blank body"),
    pytest.param(b"{", id="invalid JSON"),
    pytest.param(b"<html>not found</html>", id="HTML"),
    pytest.param(b"[4]", id="array"),
    pytest.param(b'{"observedAt": "2026-09-28T09:59:59Z"}', id="no servable"),
    pytest.param(b'{"servable": 4}', id="no observedAt"),
    pytest.param(b'{"servable": -1, "observedAt": "2026-09-28T09:59:59Z"}', id="negative"),
    pytest.param(b'{"servable": 2.5, "observedAt": "2026-09-28T09:59:59Z"}', id="fraction"),
    pytest.param(b'{"servable": "4", "observedAt": "2026-09-28T09:59:59Z"}', id="string count"),
    pytest.param(b'{"servable": 4, "observedAt": "2026-09-28T09:59:59"}', id="no time zone"),
    pytest.param(b'{"servable": 4, "observedAt": 1790000000}', id="numeric stamp"),
    pytest.param(b"\xff\xfe", id="not UTF-8"),
]


@pytest.mark.parametrize("body", INVALID_BODIES)
async def test_a_body_that_is_not_a_report_fails_with_the_reports_reason(
    client: PollClient, reporter: StartReporter, body: bytes
) -> None:
    server = await reporter(answering(body, **{"Content-Type": "application/json"}))
    result = await poll(client, server.url())
    assert result.reason == reason_for(body)
    assert result.outcome is Outcome.INVALID_REPORT


def test_the_invalid_report_reasons_are_the_spec_ones() -> None:
    assert reason_for(b"") == (
        "capacity response is not a valid report: unexpected end of JSON input"
    )
    assert reason_for(b'{"servable": -1, "observedAt": "2026-09-28T09:59:59Z"}') == (
        "capacity report is negative (-1)"
    )


async def test_a_gzip_encoded_body_is_not_decoded(
    client: PollClient, reporter: StartReporter
) -> None:
    raw = gzip.compress(json.dumps(a_report()).encode())
    server = await reporter(answering(raw, **{"Content-Encoding": "gzip"}))
    result = await poll(client, server.url())
    assert result.reason == reason_for(raw)
    assert result.reason.startswith("capacity response is not a valid report: ")


def padded_report(size: int) -> bytes:
    body = json.dumps(a_report()).encode()
    return body + b" " * (size - len(body))


async def test_a_body_of_exactly_the_limit_is_read(
    client: PollClient, reporter: StartReporter
) -> None:
    server = await reporter(answering(padded_report(65536)))
    result = await poll(client, server.url())
    assert result.outcome is Outcome.OK


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_one_byte_over_the_limit_fails(
    client: PollClient, reporter: StartReporter, chunked: bool
) -> None:
    body = padded_report(65537)

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        if chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(body)
        await response.prepare(request)
        for start in range(0, len(body), 4096):
            await response.write(body[start : start + 4096])
        await response.write_eof()
        return response

    server = await reporter(handle)
    result = await poll(client, server.url())
    assert result.reason == (
        "reading capacity response: response exceeds configured limit of 65536 bytes"
    )
    assert result.outcome is Outcome.READ_FAILED


async def test_the_limit_quoted_is_the_configured_one(reporter: StartReporter) -> None:
    from ome_routing.observer.budget import RequestBudget

    server = await reporter(answering(padded_report(2000)))
    async with PollClient(RequestBudget(1), 1024) as small:
        result = await poll(small, server.url())
    assert (
        result.reason
        == "reading capacity response: response exceeds configured limit of 1024 bytes"
    )


async def test_an_endless_chunked_body_stops_at_the_limit(
    client: PollClient, raw_server: StartRaw
) -> None:
    sent = 0

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await read_request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b" " * 8192
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            await writer.drain()

    base = await raw_server(endless)
    result = await poll(client, base + "/capacity", timeout="5s")
    assert result.reason == (
        "reading capacity response: response exceeds configured limit of 65536 bytes"
    )


# --- the network -------------------------------------------------------------------


async def test_a_server_that_never_answers_is_unreachable_after_the_timeout(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    base = await raw_server(silent)
    result = await poll(client, base + "/capacity", timeout="200ms")
    assert result.reason == "capacity endpoint unreachable: timed out after 200ms"
    assert result.outcome is Outcome.UNREACHABLE


async def test_polls_underway_together_each_time_out_after_their_own_timeout(
    client: PollClient, raw_server: StartRaw
) -> None:
    """A shorter timeout sent after a longer one still ends first, with its own reason."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    base = await raw_server(silent)
    loop = asyncio.get_running_loop()

    async def timed(timeout: str) -> tuple[str | None, float]:
        start = loop.time()
        result = await poll(client, base + "/capacity", timeout=timeout)
        return result.reason, loop.time() - start

    long = asyncio.create_task(timed("600ms"))
    await asyncio.sleep(0.05)
    (long_reason, long_took), (short_reason, short_took) = await asyncio.gather(
        long, timed("100ms")
    )
    assert short_reason == "capacity endpoint unreachable: timed out after 100ms"
    assert long_reason == "capacity endpoint unreachable: timed out after 600ms"
    assert short_took < 0.5 <= long_took


async def test_a_body_that_stalls_does_not_complete(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n{"servable": 4,')
        await writer.drain()
        await asyncio.sleep(30)

    base = await raw_server(stall)
    result = await poll(client, base + "/capacity", timeout="200ms")
    assert result.reason == "capacity request did not complete: timed out after 200ms"
    assert result.outcome is Outcome.INCOMPLETE


async def test_a_body_cut_short_fails_reading(client: PollClient, raw_server: StartRaw) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n{"servable": 4,')
        await writer.drain()

    base = await raw_server(cut)
    result = await poll(client, base + "/capacity")
    assert result.reason == (
        "reading capacity response: connection closed before the body was complete"
    )


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"", "capacity endpoint unreachable: connection closed before a response arrived"),
        (b"SPDY/9 banana\r\n\r\n", "capacity endpoint unreachable: malformed HTTP response"),
    ],
    ids=["closes at once", "garbage status line"],
)
async def test_a_server_that_does_not_speak_http_is_unreachable(
    client: PollClient, raw_server: StartRaw, answer: bytes, reason: str
) -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(answer)
        await writer.drain()

    base = await raw_server(respond)
    result = await poll(client, base + "/capacity")
    assert result.reason == reason


async def test_a_refused_connection_is_unreachable(client: PollClient, closed_port: int) -> None:
    result = await poll(client, f"http://127.0.0.1:{closed_port}/capacity")
    assert result.reason == "capacity endpoint unreachable: connection refused"


async def test_a_name_that_does_not_resolve_is_unreachable(
    client: PollClient, resolver: LoopbackResolver
) -> None:
    result = await poll(client, f"http://{UNRESOLVABLE}/capacity")
    assert result.reason == "capacity endpoint unreachable: no such host"
    assert resolver.asked == [UNRESOLVABLE]


async def test_tls_to_a_plain_http_port_is_unreachable(
    client: PollClient, reporter: StartReporter
) -> None:
    server = await reporter(answering(json.dumps(a_report())))
    result = await poll(client, server.base.replace("http://", "https://") + "/capacity")
    assert result.reason is not None
    assert result.reason.startswith("capacity endpoint unreachable: TLS handshake failed")
    assert "\n" not in result.reason and "Error(" not in result.reason


async def test_an_untrusted_certificate_is_unreachable(
    client: PollClient, reporter: StartReporter, tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_get("/capacity", answering(json.dumps(a_report())))
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        port = runner.addresses[0][1]
        result = await poll(client, f"https://127.0.0.1:{port}/capacity")
    finally:
        await runner.cleanup()
    assert result.reason == (
        "capacity endpoint unreachable: TLS certificate verification failed: self-signed certificate"
    )


async def test_a_closed_client_does_not_submit(reporter: StartReporter) -> None:
    from ome_routing.observer.budget import RequestBudget

    server = await reporter(answering(json.dumps(a_report())))
    closed = PollClient(RequestBudget(1), 65536)
    await closed.close()
    result = await poll(closed, server.url())
    assert result.reason == "capacity observation could not be submitted: observer is stopping"
    assert server.requests == []
