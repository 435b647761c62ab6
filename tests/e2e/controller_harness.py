"""Test parts for the controller on the local control plane: reporters, a controller process.

**Sharded mode.** With `OME_ROUTING_E2E_SHARDED=<replicas>` in the environment, every
`ControllerProcess` a test starts is that many replicas of `ome-routing controller
--sharding --shards 8` (short Lease timings: `SHARD_TIMING`), all reading the test's
config and sharing nothing else but the API server; unset, it is one controller with
leader election, as always. What a test reads from "the controller" means then:

- `log`: every replica's log, one after the other: a line "in the log" was logged by some
  replica, a line "not in the log" by none, and a count is over all of them;
- `metric(name)`: every replica's samples of `name`, the values of a series summed over
  the replicas, as a Prometheus query summing over the pods would give;
- `owner(namespace, name)`: the replica whose shard holds that service, with its own `log`
  and `metric`, for what only the key's writer says;
- `wait_started()`: every replica started, and every shard held by one of them, at rest
  (`core.shards.assign` moves none from its holder: the hand-over after a start is over,
  so a test sees one writer per key from then on);
- `wait_exit()`: every replica's exit code, which must be the same.

Tests that cannot run sharded by their nature are marked `unsharded_only(reason)`.
"""

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
import pytest
import yaml
from aiohttp import web
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.coordination_v1 import Lease
from prometheus_client.utils import floatToGoString

from ome_routing.core.report import format_rfc3339
from ome_routing_dev.devcluster import LocalControlPlane

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
#: the environment variable that runs every controller under test as sharded replicas
SHARDED_ENV = "OME_ROUTING_E2E_SHARDED"


def _sharded_replicas() -> int:
    raw = os.environ.get(SHARDED_ENV, "").strip()
    if not raw:
        return 0
    if not raw.isdigit() or int(raw) < 1:
        raise RuntimeError(f"{SHARDED_ENV}={raw!r}: want a replica count, 1 or more")
    return int(raw)


#: how many replicas each controller under test is (0: one controller, not sharded)
SHARDED_REPLICAS = _sharded_replicas()
#: the shards of a sharded controller under test: few, so that each replica holds several
SHARDS = 8
#: the member and shard Leases' duration, renew deadline and retry period: short, so that
#: the hand-over after the replicas start takes seconds
SHARD_TIMING = ("4s", "3s", "500ms")
#: the chart's values that grant what the replicas under test need (none unsharded)
SHARDED_CHART_VALUES: tuple[str, ...] = (
    ("--set", "controller.sharding.enabled=true", "--set", f"controller.sharding.shards={SHARDS}")
    if SHARDED_REPLICAS
    else ()
)
SHARD_GROUP_LABEL = "routing.ome-routing.io/shard-group"
SHARD_ROLE_LABEL = "routing.ome-routing.io/shard-role"


def unsharded_only(reason: str) -> pytest.MarkDecorator:
    """Skip a test in sharded mode: `reason` says why it cannot run there by its nature."""
    return pytest.mark.skipif(
        SHARDED_REPLICAS > 0, reason=f"not in sharded mode ({SHARDED_ENV}): {reason}"
    )


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


def log_fields(log: str, message: str) -> list[dict[str, Any]]:
    """The fields of each line of a controller's console log whose message is `message`,
    in order (a line is time, level, logger, message and its fields' JSON, tab-separated;
    a line without fields gives {})."""
    found: list[dict[str, Any]] = []
    for line in log.splitlines():
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3] == message:
            found.append(json.loads(parts[4]) if len(parts) > 4 else {})
    return found


def entry(tmap: dict[str, Any] | None, cluster: str) -> dict[str, Any]:
    assert tmap is not None
    return next(e for e in tmap["spec"]["entries"] if e["cluster"] == cluster)


def condition(tmap: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    assert tmap is not None
    return next(c for c in tmap["status"]["conditions"] if c["type"] == type_)


class Replica:
    """One `ome-routing controller` process: its identity, log and ports."""

    def __init__(self, identity: str, log_path: Path) -> None:
        self.identity = identity
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        #: the metrics port, known once the process has bound it (`bound_port`)
        self.port = 0
        #: the /healthz and /readyz port, known once the process has bound it (`probe_port`)
        self.probe_bound = 0

    def start(self, command: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def wait_started(self, timeout: float = PATIENCE) -> None:
        async def started() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"controller {self.identity} exited with {self.process.returncode}:\n{self.log}"
                )
            return "controller started" in self.log

        await eventually(started, timeout, f"the controller {self.identity} to start")

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


def summed(texts: list[str]) -> str:
    """Metric lines of several replicas, each series once with its values summed, in the
    order the series first appear."""
    totals: dict[str, float] = {}
    for text in texts:
        for line in text.splitlines():
            series, _, value = line.rpartition(" ")
            if series:
                totals[series] = totals.get(series, 0.0) + float(value)
    return "\n".join(f"{series} {floatToGoString(value)}" for series, value in totals.items())


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


async def counted(process: ControllerProcess, name: str, **labels: str) -> float:
    """The sum of the series of `name` (a counter, say) whose labels include `labels`, as
    the process serves them now; 0 while it shows none. For a positive signal that the
    controller did more work (polls, reconciles, probes) before a check that nothing
    changed."""
    total = 0.0
    for line in (await process.metric(name)).splitlines():
        series, _, value = line.rpartition(" ")
        metric, _, rest = series.partition("{")
        shown = dict(_LABEL.findall(rest))
        if metric == name and all(shown.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


class ControllerProcess:
    """`ome-routing controller` as a platform team runs it, in a subprocess; in sharded
    mode (the module docstring) `SHARDED_REPLICAS` of them, one group of shards."""

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
        #: the leader's Lease; in sharded mode the shard group's name
        self.lease = lease
        self.identity = identity or f"test-{os.getpid()}-{free_port()}"
        if isinstance(config, Path):
            self.config_path = config
        else:
            self.config_path = workdir / f"values-{self.identity}.yaml"
            self.config_path.write_text(yaml.safe_dump(config))
        self.sharded = SHARDED_REPLICAS > 0
        if self.sharded:
            self.replicas = [
                Replica(f"{self.identity}-{n}", workdir / f"controller-{self.identity}-{n}.log")
                for n in range(SHARDED_REPLICAS)
            ]
        else:
            self.replicas = [Replica(self.identity, workdir / f"controller-{self.identity}.log")]

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The process (in sharded mode the first replica's)."""
        return self.replicas[0].process

    @property
    def log_path(self) -> Path:
        return self.replicas[0].log_path

    def command(self, identity: str) -> list[str]:
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
            identity,
        ]
        if self.sharded:
            duration, deadline, retry = SHARD_TIMING
            command += [
                "--sharding",
                "--shards",
                str(SHARDS),
                "--leader-elect-lease-duration",
                duration,
                "--leader-elect-renew-deadline",
                deadline,
                "--leader-elect-retry-period",
                retry,
            ]
        return self.wrap(command) if self.wrap is not None else command

    def start(self) -> ControllerProcess:
        for replica in self.replicas:
            replica.start(self.command(replica.identity))
        return self

    @property
    def log(self) -> str:
        return "".join(replica.log for replica in self.replicas)

    async def wait_started(self, timeout: float = PATIENCE) -> None:
        await asyncio.gather(*(replica.wait_started(timeout) for replica in self.replicas))
        if self.sharded:
            await eventually(self.assigned, timeout, "every shard held by a replica, at rest")

    async def wait_exit(self, timeout: float = PATIENCE) -> int:
        codes = await asyncio.gather(*(replica.wait_exit(timeout) for replica in self.replicas))
        assert len(set(codes)) == 1, f"the replicas exited with {codes}:\n{self.log}"
        return codes[0]

    async def bound_port(self, timeout: float = PATIENCE) -> int:
        """The metrics port the process (in sharded mode the first replica) bound."""
        return await self.replicas[0].bound_port(timeout)

    async def probe_port(self, timeout: float = PATIENCE) -> int:
        """The probes' port the process (in sharded mode the first replica) bound."""
        return await self.replicas[0].probe_port(timeout)

    async def get_probe(self, path: str) -> tuple[int, str]:
        """GET /healthz or /readyz of the process (in sharded mode the first replica)."""
        return await self.replicas[0].get_probe(path)

    async def metric(self, name: str) -> str:
        texts = [await replica.metric(name) for replica in self.replicas]
        return texts[0] if not self.sharded else summed(texts)

    async def stop(self) -> None:
        await asyncio.gather(*(replica.stop() for replica in self.replicas))

    # -- sharded mode ------------------------------------------------------------------

    async def _leases(self) -> list[Lease]:
        client = AsyncClient(config=KubeConfig.from_file(self.kubeconfig))
        try:
            selector = {SHARD_GROUP_LABEL: self.lease}
            return [
                lease
                async for lease in client.list(Lease, namespace=self.namespace, labels=selector)
            ]
        finally:
            await client.close()

    async def holders(self) -> tuple[set[str], dict[int, str]]:
        """The group's members (their Leases' holders) and each shard's holder."""
        from ome_routing.core.shards import shard_lease_name

        members: set[str] = set()
        by_name: dict[str, str] = {}
        for lease in await self._leases():
            assert lease.metadata is not None
            holder = (lease.spec.holderIdentity if lease.spec else None) or ""
            role = (lease.metadata.labels or {}).get(SHARD_ROLE_LABEL)
            if role == "member" and holder:
                members.add(holder)
            elif role == "shard":
                by_name[str(lease.metadata.name)] = holder
        shards = {s: by_name.get(shard_lease_name(self.lease, s), "") for s in range(SHARDS)}
        return members, shards

    async def assigned(self) -> bool:
        """Whether every replica is a member and each shard is held by one of them, where
        `assign` leaves it given the holders (at rest: no hand-over to come)."""
        from ome_routing.core.shards import assign

        identities = [replica.identity for replica in self.replicas]
        members, shards = await self.holders()
        return set(identities) <= members and shards == assign(SHARDS, identities, shards)

    async def owner(self, namespace: str, name: str) -> Replica:
        """The replica whose shard holds the service `namespace/name` (the only one)."""
        if not self.sharded:
            return self.replicas[0]
        from ome_routing.core.shards import shard_of

        shard = shard_of(namespace, name, SHARDS)
        _, shards = await self.holders()
        found = [r for r in self.replicas if r.identity == shards[shard]]
        assert found, f"shard {shard} of {namespace}/{name} is held by {shards[shard]!r}"
        return found[0]
