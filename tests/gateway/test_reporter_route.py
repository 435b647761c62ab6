"""The capacity reporter chart's poll route, through a real gateway (Traefik).

OME's HTTPRoute for a service sends every path under its endpoint to the model server; the
chart `ome-capacity-reporter` adds an HTTPRoute that matches the poll URL exactly and sends
it to the reporter. Real requests through Traefik show the poll URL reaching a real
`ome-routing reporter --kubernetes` and every other path reaching the model server, for
both of the Gateway API's host schemes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from controller_harness import free_port, isvc_manifest, kubectl
from gw_objects import apply, eventually, fqdn_backend
from reporter_harness import ReporterProcess, add_pod, release_pods

from ome_routing_dev.devcluster.gateway import LocalGateway

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-capacity-reporter"
RELEASE = "caps"
REPORTER_SERVICE = f"{RELEASE}-ome-capacity-reporter"
MODEL_SERVER = "served by the model server"
SERVICE = "chat"


@pytest.fixture
def gateway(traefik: LocalGateway) -> LocalGateway:
    """These tests are about Traefik (the FQDN EndpointSlices it needs)."""
    return traefik


class ModelServer:
    """A model server stand-in: every path answers 200 with the same text, as a catch-all."""

    def __init__(self, address: str, port: int) -> None:
        self.address, self.port = address, port
        self.paths: list[str] = []
        self._runner: web.AppRunner | None = None

    async def start(self) -> ModelServer:
        async def serve(request: web.Request) -> web.Response:
            self.paths.append(request.path)
            return web.Response(text=MODEL_SERVER)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.address, self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def ome_route(
    namespace: str, gateway: LocalGateway, host: str, prefix: str, port: int
) -> dict[str, Any]:
    """OME's HTTPRoute for the service: every path under its prefix to the model server."""
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
        "backendRefs": [{"kind": "Service", "name": "model-server", "port": port}],
    }
    if prefix != "/":  # the shared host strips the prefix, as OME's routes do
        rule["filters"] = [
            {
                "type": "URLRewrite",
                "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
            }
        ]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": SERVICE, "namespace": namespace},
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": gateway.name,
                    "namespace": gateway.namespace,
                }
            ],
            "hostnames": [host],
            "rules": [rule],
        },
    }


def chart_routes(gateway: LocalGateway, namespace: str, port: int, **route: Any) -> list[Any]:
    """The chart's poll routes for the service, as `helm template` renders them."""
    values = {
        "port": port,
        "route": {
            "enabled": True,
            "gateway": {"name": gateway.name, "namespace": gateway.namespace},
            "services": [{"namespace": namespace, "name": SERVICE}],
            **route,
        },
    }
    result = subprocess.run(
        [
            str(gateway.plane.tools.helm),
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            "--show-only",
            "templates/httproute.yaml",
            "--set-json",
            f"route={json.dumps(values['route'])}",
            "--set",
            f"port={port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture
async def workload(
    gateway: LocalGateway, gateway_namespace: str, tmp_path: Path
) -> AsyncIterator[tuple[ModelServer, ReporterProcess]]:
    """The service on the gateway's cluster: one Ready pod, its model server, and the reporter."""
    plane = gateway.plane
    namespace = gateway_namespace
    await kubectl(plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace))
    model = await ModelServer("127.0.0.1", free_port()).start()
    await add_pod(plane, f"{SERVICE}-engine-0", namespace, SERVICE, model.port)
    reporter = await ReporterProcess(plane.kubeconfig, tmp_path).start()
    hosts = {
        f"model-server.{namespace}.worker-a.example.com": "127.0.0.1",
        f"reporter.{namespace}.worker-a.example.com": "127.0.0.1",
    }
    gateway.add_hosts(hosts)
    await apply(
        gateway,
        fqdn_backend(
            "model-server", namespace, f"model-server.{namespace}.worker-a.example.com", model.port
        )
        + fqdn_backend(
            REPORTER_SERVICE, namespace, f"reporter.{namespace}.worker-a.example.com", reporter.port
        ),
    )
    try:
        yield model, reporter
    finally:
        await reporter.stop()
        await model.stop()
        await release_pods(plane, namespace)


async def through(gateway: LocalGateway, host: str, path: str) -> tuple[int, str]:
    return await asyncio.to_thread(gateway.get, host, path)


def is_report(answer: tuple[int, str]) -> bool:
    status, body = answer
    return status == 200 and body.startswith("{") and json.loads(body).get("servable") == 1


@pytest.mark.parametrize(
    ("scheme", "host", "prefix"),
    [
        ("sharedHost", "llm.worker-a.example.com", "/{namespace}/chat/"),
        ("perServiceSubdomain", "chat.{namespace}.worker-a.example.com", "/"),
    ],
)
async def test_the_poll_url_reaches_the_reporter_and_every_other_path_the_model_server(
    gateway: LocalGateway,
    gateway_namespace: str,
    workload: tuple[ModelServer, ReporterProcess],
    scheme: str,
    host: str,
    prefix: str,
) -> None:
    model, reporter = workload
    namespace = gateway_namespace
    host, prefix = host.format(namespace=namespace), prefix.format(namespace=namespace)
    poll = f"{prefix.rstrip('/')}/capacity"
    await apply(gateway, [ome_route(namespace, gateway, host, prefix, model.port)])

    # OME's route alone: the poll reaches the model server, as the guide warns
    assert await eventually(
        lambda: through(gateway, host, poll), lambda a: a == (200, MODEL_SERVER)
    )

    routes = chart_routes(
        gateway, namespace, reporter.port, hostScheme=scheme,
        sharedHost="llm.worker-a.example.com", domain="worker-a.example.com",
    )  # fmt: skip
    assert [r["spec"]["rules"][0]["matches"][0]["path"]["value"] for r in routes] == [poll]
    await apply(gateway, routes)

    answer = await eventually(lambda: through(gateway, host, poll), is_report)
    assert json.loads(answer[1])["servable"] == 1
    seen = list(model.paths)
    for _ in range(5):
        assert is_report(await through(gateway, host, poll))
    assert model.paths == seen  # no poll reaches the model server any more
    for path in (f"{prefix}v1/chat/completions", f"{prefix}v1/models", prefix, f"{poll}/x"):
        assert await through(gateway, host, path) == (200, MODEL_SERVER), path
