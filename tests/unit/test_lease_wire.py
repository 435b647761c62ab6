"""Where a replica's renewals can take their own transport (`LeaseWire.of`), and why not."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig

from ome_routing.kube.lease_wire import LeaseWire


def a_client(
    user: dict[str, Any], server: str = "https://127.0.0.1:6443", **kw: Any
) -> AsyncClient:
    config = KubeConfig.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )
    return AsyncClient(config, field_manager="fm", **kw)


@pytest.mark.parametrize(
    ("user", "how"),
    [
        (
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
            "an exec plugin",
        ),
        ({"username": "u", "password": "p"}, "a username and password"),
    ],
    ids=["exec", "basic"],
)
def test_a_user_that_signs_in_otherwise_keeps_the_client(user: dict[str, Any], how: str) -> None:
    wire, why = LeaseWire.of(a_client(user, trust_env=False))
    assert wire is None
    assert why == f"the kubeconfig's user signs in with {how}"


def test_a_proxy_for_the_server_keeps_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    wire, why = LeaseWire.of(a_client({"token": "t"}))
    assert wire is None
    assert why == "a proxy is set for https://127.0.0.1:6443"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    wire, why = LeaseWire.of(a_client({"token": "t"}))
    assert wire is not None, why


@pytest.mark.parametrize(
    "user",
    [{"token": "t"}, {"tokenFile": "/var/run/secrets/token"}, {}],
    ids=["token", "token-file", "anonymous"],
)
@pytest.mark.parametrize("server", ["https://127.0.0.1:6443", "http://[::1]:8080/prefix"])
def test_a_token_a_token_file_or_none_over_either_scheme_takes_the_wire(
    user: dict[str, Any], server: str
) -> None:
    wire, why = LeaseWire.of(a_client(user, server, trust_env=False))
    assert wire is not None and why == ""
    wire.close()


def test_a_server_that_is_no_http_url_keeps_the_client() -> None:
    wire, why = LeaseWire.of(a_client({"token": "t"}, "unix:///run/k8s.sock", trust_env=False))
    assert wire is None
    assert why == "server 'unix:///run/k8s.sock' is not an http(s) URL"
