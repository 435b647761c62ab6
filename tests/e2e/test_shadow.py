"""Shadow routing policies on the local control plane, with real reporters and kubectl.

Two services share the same two reporters and the same live poll (samples 3, quorum 3):
`plain` has no shadow, `tried` carries a shadow with quorum 1 in its
`routing.ome-routing.io/shadow-routing` annotation. When worker-b's reporter drops from
4 to 1, the shadow's ceiling follows at the first low reading, and `tried`'s
ShadowTrafficMap shows the divergence and its reason, while live waits for three low
readings. At each settled point the two services' TrafficMaps and HTTPRoutes (published
through the endpoint block) are the same, byte for byte, but for the service's name.
`kubectl ome traffic diff` prints the two tables side by side. And a controller with no
shadow anywhere sends no request for a ShadowTrafficMap (the API server's own request
counter for the resource does not move).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from controller_harness import eventually, get_map, kubectl
from publisher_harness import Scene, gateway_api, scene, values

from ome_routing.core.report import format_rfc3339
from ome_routing.core.shadow import ANNOTATION
from ome_routing_dev.devcluster import LocalControlPlane

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(180)

#: the live poll: the ceiling is the highest of three readings (quorum 3 of samples 3)
LIVE_POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 3,
    "quorum": 3,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "10s",
}
#: the shadow: the lowest reading sets the ceiling
SHADOW = {"capacity": {**LIVE_POLL, "quorum": 1}}
HOST = "{{ .Name }}.{{ .Namespace }}.global.example.com"


@dataclass
class Reporter:
    """A capacity reporter on loopback that answers the counts of `pattern` in turn."""

    pattern: list[int] = field(default_factory=lambda: [4])
    requests: int = 0
    url: str = ""
    _runner: web.AppRunner | None = field(default=None, repr=False)

    def answer(self, *counts: int) -> None:
        self.pattern, self.requests = list(counts), 0

    async def start(self) -> Reporter:
        async def handle(_: web.Request) -> web.Response:
            servable = self.pattern[self.requests % len(self.pattern)]
            self.requests += 1
            stamp = format_rfc3339(datetime.now(UTC))
            return web.json_response({"servable": servable, "observedAt": stamp})

        app = web.Application()
        app.router.add_route("*", "/capacity", handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


#: service -> cluster -> its reporter: each service has its own, so that each sees the
#: whole pattern
Reporters = dict[str, dict[str, Reporter]]


@pytest.fixture
async def reporters() -> AsyncIterator[Reporters]:
    started = {
        name: {c: await Reporter().start() for c in ("worker-a", "worker-b")}
        for name in ("plain", "tried")
    }
    try:
        yield started
    finally:
        for of_service in started.values():
            for reporter in of_service.values():
                await reporter.stop()


def answer(reporters: Reporters, cluster: str, *counts: int) -> None:
    for of_service in reporters.values():
        of_service[cluster].answer(*counts)


async def a_service(
    scene: Scene, name: str, reporters: dict[str, Reporter], shadow: dict[str, Any] | None
) -> None:
    manifest: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": scene.namespace},
        "spec": {
            "model": {"name": name},
            "placement": {"policy": "ClusterAffinity", "mode": "All"},
            "routing": {"capacity": LIVE_POLL},
        },
    }
    if shadow is not None:
        manifest["metadata"]["annotations"] = {ANNOTATION: json.dumps(shadow)}
    await scene.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    candidates = [
        {
            "cluster": cluster,
            "phase": "Admitted",
            # a name, as the publisher needs (not an IP), that resolves without DNS
            "endpoint": reporter.url.replace("127.0.0.1", "localhost"),
            "admittedReplicas": 4,
            "readyReplicas": 4,
        }
        for cluster, reporter in reporters.items()
    ]
    patch = {"status": {"placement": {"phase": "Placed", "candidates": candidates}}}
    await scene.kubectl(
        "patch", "inferenceservice", name, "-n", scene.namespace,
        "--subresource=status", "--type=merge", "-p", json.dumps(patch),
    )  # fmt: skip


def ceilings(tmap: dict[str, Any] | None) -> dict[str, Any]:
    entries = ((tmap or {}).get("spec") or {}).get("entries") or []
    return {e["cluster"]: e["capacity"].get("reported") for e in entries}


def stable(document: dict[str, Any] | None, name: str, ports: dict[str, str]) -> str:
    """A live object as the controller wrote it, the service's name (and the backend names
    hashed from it) and its reporters' ports taken out: its spec, and its conditions
    without their times, by type."""
    assert document is not None
    body: dict[str, Any] = {"spec": document["spec"]}
    conditions = (document.get("status") or {}).get("conditions") or []
    # sorted by type: their order in the list follows which of the map's two writers (the
    # routing controller and the publisher) wrote first after the map was created, a race
    # with or without a shadow
    body["conditions"] = sorted(
        (
            {k: v for k, v in c.items() if k not in ("lastTransitionTime", "observedGeneration")}
            for c in conditions
        ),
        key=lambda c: str(c["type"]),
    )
    text = json.dumps(body, sort_keys=True).replace(name, "NAME")
    for port, cluster in ports.items():  # each service has its own reporters
        text = text.replace(f"localhost:{port}", f"localhost:{cluster}")
    # backend Services are named by a hash of the service's name and the cluster
    return re.sub(r'"tmb-[0-9a-f]+"', '"tmb-HASH"', text)


async def settled(scene: Scene, reporters: Reporters, expected: dict[str, int]) -> tuple[str, str]:
    """Both services' maps at `expected` ceilings, their routes published with the maps'
    weights, and the two services' maps and routes the same, byte for byte, but for
    their names. Fails (times out) if they never are the same; the writes are
    asynchronous, so the two are compared once both have settled."""
    last: dict[str, tuple[str, str]] = {}
    seen: dict[str, tuple[dict[str, Any], bool]] = {}

    async def both() -> tuple[str, str] | None:
        for name in ("plain", "tried"):
            tmap = await get_map(scene.plane, name, scene.namespace)
            route = await scene.get("httproute", f"{name}-global")
            seen[name] = (ceilings(tmap), route is not None)
            if ceilings(tmap) != expected or route is None:
                return None
            weights = [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]]
            if weights != [e["weight"] for e in tmap["spec"]["entries"]]:  # type: ignore[index]
                return None
            ports = {r.url.rsplit(":", 1)[1]: c for c, r in reporters[name].items()}
            last[name] = (stable(tmap, name, ports), stable(route, name, ports))
        return last["plain"] if last["plain"] == last["tried"] else None

    try:
        return await eventually(both, 90, f"both maps at ceilings {expected}, the same")
    except AssertionError:
        for name, (tmap_text, route_text) in last.items():
            print(name, tmap_text, route_text, sep="\n")
        print("ceilings and routes seen last:", seen)
        print(scene.controllers[0].log[-3000:])
        raise


async def shadow_map(scene: Scene, name: str) -> dict[str, Any] | None:
    return await scene.get("shadowtrafficmap", name)


async def kubectl_ome(plane: LocalControlPlane, tmp_path: Path, *args: str) -> Any:
    """`kubectl ome ...` in a thread: the reporters answer from this event loop."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "kubectl-ome"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ome_routing.cli.kubectl_ome "$@"\n')
    script.chmod(0o755)
    env = plane.env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return await asyncio.to_thread(
        subprocess.run,
        [str(plane.tools.kubectl), "ome", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_a_shadow_quorum_diverges_while_reports_drop_and_live_stays_the_same(
    scene: Scene, reporters: Reporters, tmp_path: Path
) -> None:
    await scene.start(values(globalHostTemplate=HOST))
    await a_service(scene, "plain", reporters["plain"], None)
    await a_service(scene, "tried", reporters["tried"], SHADOW)

    # steady: every reading is 4, and both policies agree
    steady = await settled(scene, reporters, {"worker-a": 4, "worker-b": 4})
    shadow = await eventually(divergent(scene, 0, {"worker-a": 4, "worker-b": 4}), 60, "agreement")
    owner = shadow["metadata"]["ownerReferences"][0]
    tmap = await get_map(scene.plane, "tried", scene.namespace)
    assert tmap is not None
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrafficMap", "tried", tmap["metadata"]["uid"], True,
    )  # fmt: skip
    assert await shadow_map(scene, "plain") is None

    # worker-b's reports drop to 1 twice in every three: live (the highest of three
    # readings) keeps 4, the shadow (the lowest) takes 1 and holds it
    answer(reporters, "worker-b", 1, 1, 4)
    shadow = await eventually(
        divergent(scene, 2, {"worker-a": 4, "worker-b": 1}), 60, "the shadow to diverge"
    )
    homes = {h["cluster"]: h for h in shadow["status"]["homes"]}
    assert homes["worker-b"]["reason"] == "live ceiling 4, shadow ceiling 1"
    assert (homes["worker-b"]["shadowWeight"], homes["worker-b"]["shadowShare"]) == (1, "20.0%")
    assert (homes["worker-b"]["liveWeight"], homes["worker-b"]["liveShare"]) == (1, "50.0%")
    assert homes["worker-a"]["reason"] == "the other homes' weights differ"
    assert await settled(scene, reporters, {"worker-a": 4, "worker-b": 4}) == steady

    diff = await kubectl_ome(
        scene.plane, tmp_path, "traffic", "diff", "tried", "-n", scene.namespace
    )
    assert diff.returncode == 0, diff.stderr
    lines = diff.stdout.splitlines()
    assert lines[0].split() == [
        "CLUSTER", "LIVE", "WEIGHT", "LIVE", "SHARE", "LIVE", "CEILING",
        "SHADOW", "WEIGHT", "SHADOW", "SHARE", "SHADOW", "CEILING", "REASON",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split(None, 7) for line in lines[1:3]}
    assert rows["worker-b"][:7] == ["worker-b", "1", "50.0%", "ControlPlane", "4", "1", "20.0%"], (
        diff.stdout
    )
    assert re.search(r"Endpoint 1 +live ceiling 4, shadow ceiling 1$", lines[2]), diff.stdout
    annotation_field = f'metadata.annotations["{ANNOTATION}"]'
    assert f"Shadow from {annotation_field}: 2 home(s) diverge." in diff.stdout

    # every reading is 1: live follows, and the shadow agrees again
    answer(reporters, "worker-b", 1)
    assert await settled(scene, reporters, {"worker-a": 4, "worker-b": 1}) != steady
    await eventually(divergent(scene, 0, {"worker-a": 4, "worker-b": 1}), 60, "agreement")

    missing = await kubectl_ome(
        scene.plane, tmp_path, "traffic", "diff", "plain", "-n", scene.namespace
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f'error: TrafficMap "{scene.namespace}/plain" has no shadow routing policy (no '
        f"ShadowTrafficMap of that name): set the {ANNOTATION} annotation on the "
        "InferenceService, or the chart's shadowRouting"
    )

    # removing the annotation removes the ShadowTrafficMap
    await scene.kubectl(
        "annotate", "inferenceservice", "tried", "-n", scene.namespace, f"{ANNOTATION}-"
    )

    async def removed() -> bool:
        return await shadow_map(scene, "tried") is None

    await eventually(removed, 60, "the ShadowTrafficMap to be deleted with the shadow")
    # the API server counts requests for the kind (the other test relies on it)
    assert await kubectl_counted(scene.plane) > 0


def divergent(scene: Scene, homes: int, shadow_ceilings: dict[str, int]) -> Any:
    """A probe: `tried`'s ShadowTrafficMap with `homes` divergent and these ceilings."""

    async def seen() -> dict[str, Any] | None:
        found = await shadow_map(scene, "tried")
        status = (found or {}).get("status") or {}
        ceilings_now = {
            e["cluster"]: e["capacity"].get("reported") for e in status.get("entries") or []
        }
        if status.get("divergentHomes") == homes and ceilings_now == shadow_ceilings:
            return found
        return None

    return seen


def shadow_requests(plane: LocalControlPlane) -> int:
    """How many requests for ShadowTrafficMaps the API server has answered, of any verb."""
    metrics = plane.kubectl("get", "--raw", "/metrics").stdout
    total = 0
    for line in metrics.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="shadowtrafficmaps"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def test_without_a_shadow_no_request_for_a_shadowtrafficmap_is_made(
    scene: Scene, reporters: Reporters
) -> None:
    before = await kubectl_counted(scene.plane)
    await scene.start(values(globalHostTemplate=HOST))
    await a_service(scene, "plain", reporters["plain"], None)
    await settled_one(scene, "plain", {"worker-a": 4, "worker-b": 4})
    reporters["plain"]["worker-b"].answer(1)
    await settled_one(scene, "plain", {"worker-a": 4, "worker-b": 1})
    assert await kubectl_counted(scene.plane) == before
    assert await shadow_map(scene, "plain") is None


async def kubectl_counted(plane: LocalControlPlane) -> int:
    return await asyncio.to_thread(shadow_requests, plane)


async def settled_one(scene: Scene, name: str, expected: dict[str, int]) -> None:
    async def seen() -> bool:
        tmap = await get_map(scene.plane, name, scene.namespace)
        route = await scene.get("httproute", f"{name}-global")
        return ceilings(tmap) == expected and route is not None

    await eventually(seen, 90, f"{name} at ceilings {expected}, published")


_ = kubectl
