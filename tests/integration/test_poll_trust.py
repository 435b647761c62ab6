"""The operator's transport settings on real connections: a private CA, a client
certificate, a bearer token that rotates, and the addresses polls may not go to.

The servers are aiohttp ones on loopback serving TLS with the reporter's own context
(`reporter.tls`), and the installed `ome-routing reporter` with its TLS options; the
certificates come from a private CA made with openssl (`devcluster.pki`), whose serving
certificate names 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner

from ome_routing.cli.reporter import reporter
from ome_routing.core.trustrules import TrustSettings, load_trust
from ome_routing.observer import failures
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.polling import PollClient, build_request, probe_request
from ome_routing.observer.trust import Trust, prepare
from ome_routing.reporter.tls import server_context
from ome_routing_dev.devcluster.pki import Pki, make_pki

from .conftest import LOCAL_NAME, LOOPBACK, LoopbackResolver, a_report, seconds

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

TOKEN = "s3cret-token-1"
TIMEOUT = seconds("5s")
#: The TLS reason of a server whose CA the client does not trust (the server sends its
#: chain up to the root, as OpenSSL builds it from the store of its client CA).
WRONG_CA = (
    "capacity endpoint unreachable: TLS certificate verification failed: "
    "self-signed certificate in certificate chain"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The private CA: a serving certificate for 127.0.0.1 and a client certificate."""
    return make_pki(tmp_path_factory.mktemp("private-ca"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA that signed neither the server's certificate nor the client's."""
    return make_pki(tmp_path_factory.mktemp("other-ca"))


@dataclass
class Seen:
    """What the server saw of each request that reached its handler."""

    tokens: list[str | None] = field(default_factory=list)
    client_subjects: list[Any] = field(default_factory=list)


def _app(seen: Seen) -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        token = request.headers.get("Authorization")
        seen.tokens.append(token)
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        seen.client_subjects.append(peer and dict(x[0] for x in peer["subject"]))
        if token != f"Bearer {TOKEN}":
            return web.Response(status=401)
        if request.path == "/v1/models":
            return web.json_response({"data": []})
        return web.json_response(a_report(servable=3))

    app = web.Application()
    app.router.add_route("*", "/capacity", answer)
    app.router.add_route("*", "/v1/models", answer)
    return app


async def _serve(seen: Seen, context: ssl.SSLContext | None) -> AsyncIterator[str]:
    runner = web.AppRunner(_app(seen))
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"{'https' if context else 'http'}://{LOOPBACK}:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
async def mtls_server(pki: Pki, seen: Seen) -> AsyncIterator[str]:
    """HTTPS on 127.0.0.1 that requires a client certificate of the private CA."""
    context = server_context(pki.serving_cert, pki.serving_key, client_ca=pki.ca_cert)
    async for base in _serve(seen, context):
        yield base


@pytest.fixture
async def plain_server(seen: Seen) -> AsyncIterator[str]:
    async for base in _serve(seen, None):
        yield base


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def _trust(pki: Pki, token_file: Path | None = None, **more: Any) -> Trust:
    settings = TrustSettings(
        ca_bundle_file=str(pki.ca_cert),
        client_cert_file=str(pki.admin_cert),
        client_key_file=str(pki.admin_key),
        bearer_token_file=str(token_file) if token_file else "",
        **more,
    )
    trust = prepare(settings)
    assert trust is not None
    return trust


@pytest.fixture
async def trusted(
    pki: Pki, token_file: Path, resolver: LoopbackResolver
) -> AsyncIterator[PollClient]:
    """A poll client with the private CA, the client certificate and the token."""
    client = PollClient(RequestBudget(4), 65536, resolver=resolver, trust=_trust(pki, token_file))
    yield client
    await client.close()


async def test_a_poll_and_a_probe_pass_through_a_private_ca_with_a_client_cert_and_a_token(
    trusted: PollClient, mtls_server: str, seen: Seen
) -> None:
    poll = await trusted.poll(build_request(mtls_server, "/capacity", "GET"), TIMEOUT)
    assert poll.reason is None, poll.reason
    assert poll.reading is not None and poll.reading.servable == 3

    probe = await trusted.probe(probe_request(f"{mtls_server}/v1/models", "GET"), TIMEOUT)
    assert (probe.status, probe.failure) == (200, None)

    # the server checked both: the token, and a client certificate of the private CA
    assert seen.tokens == [f"Bearer {TOKEN}"] * 2
    assert (
        seen.client_subjects == [{"organizationName": "system:masters", "commonName": "admin"}] * 2
    )


async def test_the_system_store_does_not_trust_the_private_ca(
    resolver: LoopbackResolver, mtls_server: str, seen: Seen
) -> None:
    """Without the settings (OME's client), the private CA's server is refused."""
    async with PollClient(RequestBudget(1), 65536, resolver=resolver) as client:
        poll = await client.poll(build_request(mtls_server, "/capacity", "GET"), TIMEOUT)
    assert poll.reason == WRONG_CA
    assert seen.tokens == []


async def test_a_wrong_ca_fails_with_the_tls_reason(
    other_ca: Pki, pki: Pki, token_file: Path, resolver: LoopbackResolver, mtls_server: str,
    seen: Seen,
) -> None:  # fmt: skip
    trust = prepare(
        TrustSettings(
            ca_bundle_file=str(other_ca.ca_cert),
            client_cert_file=str(pki.admin_cert),
            client_key_file=str(pki.admin_key),
            bearer_token_file=str(token_file),
        )
    )
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=trust) as client:
        poll = await client.poll(build_request(mtls_server, "/capacity", "GET"), TIMEOUT)
        probe = await client.probe(probe_request(f"{mtls_server}/v1/models", "GET"), TIMEOUT)
    reason = WRONG_CA
    assert poll.reason == reason
    assert probe.failure is not None and probe.failure.reason == reason
    assert seen.tokens == []  # the token never left the client


async def test_a_server_that_requires_a_client_cert_refuses_a_poll_without_one(
    pki: Pki, token_file: Path, resolver: LoopbackResolver, mtls_server: str, seen: Seen
) -> None:
    trust = prepare(
        TrustSettings(ca_bundle_file=str(pki.ca_cert), bearer_token_file=str(token_file))
    )
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=trust) as client:
        poll = await client.poll(build_request(mtls_server, "/capacity", "GET"), TIMEOUT)
    assert poll.outcome is failures.Outcome.UNREACHABLE
    assert seen.tokens == []


async def test_the_token_is_not_sent_over_plain_http(
    trusted: PollClient, plain_server: str, seen: Seen
) -> None:
    poll = await trusted.poll(build_request(plain_server, "/capacity", "GET"), TIMEOUT)
    assert poll.reason == "capacity endpoint returned HTTP 401"
    assert seen.tokens == [None]


async def _until_the_server_sees(
    client: PollClient, base: str, seen: Seen, token: str
) -> list[str | None]:
    """Poll until the server is sent `token`; what it was sent on the way."""
    request = build_request(base, "/capacity", "GET")
    for _ in range(200):  # the file is looked at again within a second
        await client.poll(request, TIMEOUT)
        if seen.tokens[-1] == f"Bearer {token}":
            return seen.tokens
        await asyncio.sleep(0.05)
    raise AssertionError(f"the rotated token never reached the server: {seen.tokens[-3:]}")


@pytest.fixture
def secret_volume(tmp_path: Path) -> Iterator[Path]:
    """A token file laid out as the kubelet lays out a Secret volume: `token` ->
    `..data/token`, `..data` -> a timestamped directory, swapped atomically on update."""
    volume = tmp_path / "volume"
    volume.mkdir()
    first = volume / "..2026_12_03_v1"
    first.mkdir()
    (first / "token").write_text(TOKEN)
    os.symlink(first.name, volume / "..data")
    os.symlink("..data/token", volume / "token")
    yield volume / "token"


def _update_secret(token_path: Path, value: str, version: str) -> None:
    volume = token_path.parent
    fresh = volume / f"..2026_12_03_{version}"
    fresh.mkdir()
    (fresh / "token").write_text(value)
    os.symlink(fresh.name, volume / "..data_tmp")
    os.replace(volume / "..data_tmp", volume / "..data")


async def test_a_rotated_token_is_picked_up_without_a_restart(
    pki: Pki, secret_volume: Path, resolver: LoopbackResolver, mtls_server: str, seen: Seen
) -> None:
    trust = _trust(pki, secret_volume)
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=trust) as client:
        request = build_request(mtls_server, "/capacity", "GET")
        assert (await client.poll(request, TIMEOUT)).reason is None

        _update_secret(secret_volume, "rotated-token-2", "v2")
        sent = await _until_the_server_sees(client, mtls_server, seen, "rotated-token-2")
    # the old token until the file was looked at again, then only the new one
    first_new = sent.index("Bearer rotated-token-2")
    assert set(sent[:first_new]) == {f"Bearer {TOKEN}"}


async def test_a_token_file_that_disappears_keeps_the_last_token(
    pki: Pki, token_file: Path, resolver: LoopbackResolver, mtls_server: str, seen: Seen
) -> None:
    trust = _trust(pki, token_file)
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=trust) as client:
        request = build_request(mtls_server, "/capacity", "GET")
        assert (await client.poll(request, TIMEOUT)).reason is None
        token_file.unlink()
        # the file is looked at again once at least a second passed on the loop's clock
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < 1.1:
            await asyncio.sleep(0.1)
        assert (await client.poll(request, TIMEOUT)).reason is None
    assert seen.tokens == [f"Bearer {TOKEN}"] * 2


# --- where polls may go --------------------------------------------------------------


def _ruled(block: dict[str, Any]) -> Trust:
    trust = prepare(load_trust(block))
    assert trust is not None
    return trust


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (
            {"denyCIDRs": ["169.254.0.0/16", "127.0.0.0/8"]},
            "address 127.0.0.1 is denied by routing.observer.denyCIDRs 127.0.0.0/8",
        ),
        (
            {"allowCIDRs": ["10.0.0.0/8", "fd00::/8"]},
            "address 127.0.0.1 is not in routing.observer.allowCIDRs",
        ),
        (
            {"allowCIDRs": ["127.0.0.0/8"], "denyCIDRs": ["127.0.0.1/32"]},
            "address 127.0.0.1 is denied by routing.observer.denyCIDRs 127.0.0.1/32",
        ),
    ],
    ids=["denied", "not-allowed", "deny-wins"],
)
@pytest.mark.parametrize("host", [LOCAL_NAME, LOOPBACK], ids=["name", "literal"])
async def test_a_refused_address_fails_the_poll_and_the_probe_before_connecting(
    resolver: LoopbackResolver,
    plain_server: str,
    seen: Seen,
    block: dict[str, Any],
    reason: str,
    host: str,
) -> None:
    base = plain_server.replace(LOOPBACK, host)
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=_ruled(block)) as c:
        poll = await c.poll(build_request(base, "/capacity", "GET"), TIMEOUT)
        probe = await c.probe(probe_request(f"{base}/v1/models", "GET"), TIMEOUT)
    assert poll.reason == f"capacity endpoint unreachable: {reason}"
    assert probe.failure is not None and probe.failure.reason == poll.reason
    assert seen.tokens == []  # nothing reached the server


async def test_an_allowed_address_is_polled(
    resolver: LoopbackResolver, plain_server: str, seen: Seen
) -> None:
    trust = _ruled({"allowCIDRs": ["127.0.0.0/8"], "denyCIDRs": ["169.254.0.0/16"]})
    base = plain_server.replace(LOOPBACK, LOCAL_NAME)
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=trust) as client:
        poll = await client.poll(build_request(base, "/capacity", "GET"), TIMEOUT)
    # it got through to the server, which wants a token that plain HTTP never carries
    assert poll.reason == "capacity endpoint returned HTTP 401"
    assert seen.tokens == [None]


# --- the reporter serves TLS ---------------------------------------------------------


@pytest.fixture
def tls_reporter(pki: Pki) -> Iterator[str]:
    """`ome-routing reporter` serving HTTPS, requiring a client certificate of the CA."""
    command = [
        sys.executable, "-m", "ome_routing.cli.main", "reporter", "--servable", "6",
        "--port", "0", "--tls-cert-file", str(pki.serving_cert),
        "--tls-private-key-file", str(pki.serving_key), "--client-ca-file", str(pki.ca_cert),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            found = re.search(r"reporting on (https://127\.0\.0\.1:\d+)/capacity", line.decode())
            if found:
                yield found.group(1)
                break
        else:
            raise AssertionError(f"the reporter exited ({process.wait()}) without serving")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.timeout(60)
async def test_the_reporter_serves_a_poll_over_tls_to_a_private_ca(
    pki: Pki, other_ca: Pki, resolver: LoopbackResolver, tls_reporter: str
) -> None:
    request = build_request(tls_reporter, "/capacity", "GET")
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=_trust(pki)) as c:
        poll = await c.poll(request, TIMEOUT)
    assert poll.reason is None, poll.reason
    assert poll.reading is not None and poll.reading.servable == 6

    no_cert = prepare(TrustSettings(ca_bundle_file=str(pki.ca_cert)))
    async with PollClient(RequestBudget(1), 65536, resolver=resolver, trust=no_cert) as c:
        refused = await c.poll(request, TIMEOUT)
    assert refused.outcome is failures.Outcome.UNREACHABLE


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--client-ca-file", "ca.crt"], "--client-ca-file needs --tls-cert-file and"),
        (["--tls-cert-file", "tls.crt"], "give both --tls-cert-file and --tls-private-key-file"),
        (
            ["--tls-cert-file", "/nonexistent/tls.crt", "--tls-private-key-file", "/x/tls.key"],
            "--tls-cert-file /nonexistent/tls.crt and --tls-private-key-file /x/tls.key "
            "cannot be loaded: no such file or directory",
        ),
    ],
    ids=["client-ca-alone", "cert-alone", "missing-files"],
)
@pytest.mark.parametrize("mode", [["--servable", "1"], ["--kubernetes"]], ids=["fixed", "kube"])
def test_the_reporter_refuses_tls_options_that_cannot_work(
    args: list[str], message: str, mode: list[str]
) -> None:
    result = CliRunner().invoke(reporter, [*mode, "--port", "0", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
