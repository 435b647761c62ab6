"""Which service a poll asks about: the three poll URL shapes of OME's capacity-polling guide."""

from __future__ import annotations

import pytest
from reporter_builders import an_isvc

from ome_routing.reporter.urls import ServiceIndex, bare_host, service_for

QWEN = ("qwen3-0-6b", "qwen3-0-6b")
INDEX = ServiceIndex.of(
    [
        an_isvc(),
        an_isvc("llama-chat", "prod", url="http://llama-chat-prod.example.com/"),
        an_isvc("shared", "prod", url="http://llm.example.com/prod/shared/"),
    ]
)


@pytest.mark.parametrize(
    ("host", "path", "expected"),
    [
        # Gateway API, per-service subdomains (default domain template)
        ("qwen3-0-6b.qwen3-0-6b.worker-a.example.com", "/capacity", QWEN),
        # Gateway API, shared host with a path prefix
        ("llm.worker-a.example.com", "/qwen3-0-6b/qwen3-0-6b/capacity", QWEN),
        # Kubernetes Ingress, on the engine Service's port
        ("qwen3-0-6b.qwen3-0-6b.worker-a.example.com:8080", "/capacity", QWEN),
        # a domain template of one's own: by the host of status.url
        ("llama-chat-prod.example.com", "/capacity", ("prod", "llama-chat")),
        ("LLAMA-CHAT-PROD.example.com.", "/capacity", ("prod", "llama-chat")),
        ("llm.example.com", "/prod/shared/capacity", ("prod", "shared")),
    ],
    ids=["subdomain", "shared-host", "ingress-port", "status-url-host", "host-case", "shared"],
)
def test_each_poll_url_shape_finds_its_service(
    host: str, path: str, expected: tuple[str, str]
) -> None:
    assert service_for(INDEX, host, path, "/capacity") == expected


@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("other.qwen3-0-6b.worker-a.example.com", "/capacity"),
        ("llm.worker-a.example.com", "/capacity"),
        ("llm.worker-a.example.com", "/qwen3-0-6b/other/capacity"),
        ("llm.worker-a.example.com", "/x/qwen3-0-6b/qwen3-0-6b/capacity"),
        ("qwen3-0-6b.qwen3-0-6b.worker-a.example.com", "/v1/models"),
        ("llm.example.com", "/prod/shared/health"),
    ],
)
def test_a_url_of_no_known_service_finds_none(host: str, path: str) -> None:
    assert service_for(INDEX, host, path, "/capacity") is None


def test_the_poll_path_is_the_configured_one() -> None:
    host = "qwen3-0-6b.qwen3-0-6b.worker-a.example.com"
    assert service_for(INDEX, host, "/v1/capacity", "/v1/capacity") == QWEN
    assert service_for(INDEX, host, "/capacity", "/v1/capacity") is None


@pytest.mark.parametrize(
    ("header", "host"),
    [("a.b.c:8080", "a.b.c"), ("A.B.C.", "a.b.c"), ("[::1]:80", "[::1]"), ("a.b", "a.b")],
)
def test_the_host_header_loses_its_port_case_and_final_dot(header: str, host: str) -> None:
    assert bare_host(header) == host
