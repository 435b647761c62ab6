"""Test parts for the controller on the local control plane: reporters, a controller process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml
from aiohttp import web

from ome_routing.core.report import format_rfc3339
from ome_routing.devcluster import LocalControlPlane

T = TypeVar("T")

#: A poll fast enough for a test: a new count shows after two polls (quorum 2, period 1s).
#: maxAge is well above the quorum's span, so that polls running late on a loaded machine
#: do not age the ceilings out while a test looks at something else; the tests of
#: staleness set `STALE_IN_3S`.
FAST_POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 3,
    "quorum": 2,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "10s",
}
#: The fast poll for the tests of staleness: a reading is stale 3s after its stamp.
STALE_IN_3S = {**FAST_POLL, "maxAge": "3s"}
ROUTING_ON = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Reporter:
    """A capacity reporter on loopback whose answers a test can change while it runs."""

    servable: int = 2
    status: int = 200
    #: how old (positive) or how far ahead (negative) the stamp is
    age: timedelta = timedelta(0)
    #: a fixed stamp, as a reporter that froze keeps sending
    frozen_at: datetime | None = None
    requests: int = 0
    url: str = ""
    _runner: web.AppRunner | None = field(default=None, repr=False)

    async def start(self) -> Reporter:
        async def handle(_: web.Request) -> web.Response:
            self.requests += 1
            if self.status != 200:
                return web.Response(status=self.status, text="not a reporter")
            stamp = self.frozen_at or datetime.now(UTC) - self.age
            body = {"servable": self.servable, "observedAt": format_rfc3339(stamp)}
            return web.json_response(body)

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


def isvc_manifest(
    name: str, namespace: str, capacity: dict[str, Any] | None = None, **routing: Any
) -> str:
    spec_routing: dict[str, Any] = dict(routing)
    if capacity is not None:
        spec_routing["capacity"] = capacity
    manifest = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": name},
            "placement": {"policy": "ClusterAffinity", "mode": "All"},
            "routing": spec_routing,
        },
    }
    return yaml.safe_dump(manifest)


def placement_patch(homes: dict[str, str], admitted: int = 2, ready: int = 2) -> str:
    candidates = [
        {
            "cluster": c,
            "phase": "Admitted",
            "endpoint": url,
            "admittedReplicas": admitted,
            "readyReplicas": ready,
        }
        for c, url in homes.items()
    ]
    return json.dumps({"status": {"placement": {"phase": "Placed", "candidates": candidates}}})


async def kubectl(
    plane: LocalControlPlane, *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(plane.kubectl, *args, input=input, check=check)


async def place(
    plane: LocalControlPlane, name: str, namespace: str, homes: dict[str, str], **counts: int
) -> None:
    await kubectl(
        plane,
        "patch",
        "inferenceservice",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        placement_patch(homes, **counts),
    )


def delete_namespace(plane: LocalControlPlane, namespace: str) -> None:
    """Delete a test's namespace, leaving nothing for the next test's controller.

    A map the publisher has published holds its finalizer, and once the test's controller
    has stopped nobody removes it: the map would stay, and the next test's controller (which
    watches every namespace) would finalize it meanwhile, with writes and log lines of its
    own. The maps' finalizers are dropped first (the API server refuses any change in a
    namespace that is gone).
    """
    listed = plane.kubectl("get", "trafficmaps", "-n", namespace, "-o", "name", check=False)
    for tmap in listed.stdout.split():
        plane.kubectl(
            "patch", tmap, "-n", namespace, "--type=merge",
            "-p", '{"metadata": {"finalizers": null}}', check=False,
        )  # fmt: skip
    plane.delete_namespace(namespace)


async def get_map(plane: LocalControlPlane, name: str, namespace: str) -> dict[str, Any] | None:
    result = await kubectl(
        plane, "get", "trafficmap", name, "-n", namespace, "-o", "json", check=False
    )
    if result.returncode != 0:
        return None
    return json.loads(result.stdout)  # type: ignore[no-any-return]


#: How long a wait lasts unless a test says otherwise: a deadline for a loaded machine
#: (two processes on two busy cores), not a bound any test asserts.
PATIENCE = 60.0


async def eventually(
    probe: Callable[[], Awaitable[T | None]], timeout: float = PATIENCE, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something other than None/False."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def entry(tmap: dict[str, Any] | None, cluster: str) -> dict[str, Any]:
    assert tmap is not None
    return next(e for e in tmap["spec"]["entries"] if e["cluster"] == cluster)


def condition(tmap: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    assert tmap is not None
    return next(c for c in tmap["status"]["conditions"] if c["type"] == type_)


class ControllerProcess:
    """`ome-routing controller` as a platform team runs it, in a subprocess."""

    def __init__(
        self,
        kubeconfig: Path,
        config: dict[str, Any] | Path,
        workdir: Path,
        *,
        lease: str,
        identity: str = "",
        namespace: str = "default",
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        #: runs the command inside something, e.g. a `NameSandbox` resolving made-up hosts
        self.wrap = wrap
        #: the controller's own namespace: its Lease (and ConfigMap) live there
        self.namespace = namespace
        self.workdir = workdir
        self.lease = lease
        self.identity = identity or f"test-{os.getpid()}-{free_port()}"
        if isinstance(config, Path):
            self.config_path = config
        else:
            self.config_path = workdir / f"values-{self.identity}.yaml"
            self.config_path.write_text(yaml.safe_dump(config))
        #: the metrics port, known once the process has bound it (`bound_port`)
        self.port = 0
        #: the /healthz and /readyz port, known once the process has bound it (`probe_port`)
        self.probe_bound = 0
        self.log_path = workdir / f"controller-{self.identity}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ControllerProcess:
        command = [
            sys.executable,
            "-m",
            "ome_routing.cli.main",
            "controller",
            "--config",
            str(self.config_path),
            "--kubeconfig",
            str(self.kubeconfig),
            "--namespace",
            self.namespace,
            # port 0: the process takes a free port itself; a port picked here and bound
            # later could be taken in between by any other process on the machine
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--lease-name",
            self.lease,
            "--identity",
            self.identity,
        ]
        if self.wrap is not None:
            command = self.wrap(command)
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def wait_started(self, timeout: float = PATIENCE) -> None:
        async def started() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"controller exited with {self.process.returncode}:\n{self.log}"
                )
            return "controller started" in self.log

        await eventually(started, timeout, "the controller to start")

    async def wait_exit(self, timeout: float = PATIENCE) -> int:
        assert self.process is not None
        return await asyncio.to_thread(self.process.wait, timeout)

    async def bound_port(self, timeout: float = PATIENCE) -> int:
        """The metrics port the process bound, from its log."""

        async def logged() -> int | None:
            found = re.search(r'serving /metrics.*"address": "127\.0\.0\.1:(\d+)"', self.log)
            return int(found.group(1)) if found else None

        if not self.port:
            self.port = await eventually(logged, timeout, "the metrics address in the log")
        return self.port

    async def probe_port(self, timeout: float = PATIENCE) -> int:
        """The /healthz and /readyz port the process bound, from its log."""

        async def logged() -> int | None:
            found = re.search(
                r'serving /healthz and /readyz.*"address": "127\.0\.0\.1:(\d+)"', self.log
            )
            return int(found.group(1)) if found else None

        if not self.probe_bound:
            self.probe_bound = await eventually(logged, timeout, "the probe address in the log")
        return self.probe_bound

    async def get_probe(self, path: str) -> tuple[int, str]:
        """GET /healthz or /readyz: the status and the body."""
        port = await self.probe_port()
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(f"http://127.0.0.1:{port}{path}") as response,
        ):
            return response.status, await response.text()

    async def metric(self, name: str) -> str:
        port = await self.bound_port()
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        return "\n".join(line for line in text.splitlines() if line.startswith(name))

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.process.wait, 20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                await asyncio.to_thread(self.process.wait, 10)
