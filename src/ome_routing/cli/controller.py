"""`ome-routing controller`: the routing controller, as a platform team runs it.

Start-up order matters: the leader election timings and then the operator config are
validated before anything else, and an unusable one ends the process with exit code 1 and
one line in the log (`Invalid leader election timing`, as OME's manager logs it, or
`invalid multi-cluster configuration: ...`), so that a bad `helm upgrade` shows as a
rollout that does not finish.

With leader election, the routing controller and the publisher write through a
`FencedClient` whose gate is the elector (`kube.fencing`, `kube.leader`); the elector
keeps a client of its own. A lost Lease ends the process with exit code 1 and
`Failed to start manager` (error `leader election lost`), as OME's manager, so that
Kubernetes restarts it as a standby.

With `--sharding` (ours, off by default) there is no leader: each replica holds a member
Lease and the shard Leases it is given (`kube.sharding.ShardSet`, on the plain client,
outside any gate), and the caches, the routing controller and the publisher all run on
every replica, each doing the work of the keys whose shard it holds. Their writes go
through one `FencedClient` whose gate is `ShardGate`: every write is fenced by the
tenure of its key's shard, set around the reconcile that makes it. A lost shard does not
end the process (its keys are let go; another replica takes the shard), and
`ome_routing_leader` stays 0. `--lease-name` names the group of Leases and the election's
timings time them.

The process's long-running tasks (the elector or the work, the collector's pacer, the
signal watch) and the leader's (the caches, the routing controller, the publisher) run in
task groups (`kube.tasks`): one that fails stops the rest, and the process exits with
code 1 and `Failed to start manager` with the error, as OME's manager does when one of its
runnables fails, rather than running on without it.

`/metrics` is served on `--metrics-bind-address` (`:8080`), `/healthz` and `/readyz` on
`--health-probe-bind-address` (`:8081`), apart, as a kubebuilder manager serves them;
what the probes say is `kube.health`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import sys
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import click
import yaml
from aiohttp import web
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.core_v1 import ConfigMap

from ome_routing.cli.params import DurationParam
from ome_routing.core.config import (
    ROLE_CONTROL_PLANE,
    ConfigError,
    OperatorConfig,
    config_from_multicluster,
    config_from_values,
)
from ome_routing.core.durations import Duration
from ome_routing.core.endpoint import BUILTIN_PUBLISHER
from ome_routing.core.report import FORMAT_REPORT
from ome_routing.core.shadow import checked_config
from ome_routing.kube.caches import SharedCaches
from ome_routing.kube.controller import Controller
from ome_routing.kube.fencing import FencedClient
from ome_routing.kube.health import Health, answer, loop_time
from ome_routing.kube.leader import LOST, ElectionSettings, LeaderElector, LeadershipLost
from ome_routing.kube.publisher import Publisher
from ome_routing.kube.sharding import ShardGate, ShardSet
from ome_routing.kube.shardwork import ShardOwner
from ome_routing.kube.tasks import failed_task, run_together
from ome_routing.kube.watching import WatchTiming
from ome_routing.logs import configure
from ome_routing.metrics import RoutingMetrics
from ome_routing.observer import eventloop, pace_collections, tune_gc
from ome_routing.observer.polling import PollClient
from ome_routing.observer.trust import TrustError, prepare

log = logging.getLogger("ome_routing.setup")

#: the clients' default field manager (the routing controller's; the publisher names its own)
FIELD_MANAGER = "ome-routing"

#: OME's ConfigMap, read by default; the chart names its own with --config-map
CONFIGMAP = "inferenceservice-config"
CONFIGMAP_KEY = "multicluster"
LEASE_NAME = "ome-routing-controller"
#: `--shards`: its default, and its bound (a Lease per shard, renewed every retry period)
DEFAULT_SHARDS = 64
MAX_SHARDS = 1024
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class StartupError(Exception):
    """The controller cannot start; the message is the log line."""


class _Stopped(Exception):
    """SIGTERM or SIGINT: the process stops, with exit code 0."""


def config_from_document(document: Any, source: str) -> OperatorConfig:
    """A Helm values file (top-level `ome`) or the `multicluster` block itself."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise StartupError(f"read operator config: {source} must hold a YAML mapping")
    if "ome" in document:
        return checked_config(config_from_values(document))
    return checked_config(config_from_multicluster(document))


def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise StartupError(f"read operator config: {source} is not valid YAML: {err}") from None


async def read_config(
    client: AsyncClient | None,
    config_file: Path | None,
    namespace: str,
    configmap_name: str = CONFIGMAP,
) -> OperatorConfig:
    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except OSError as err:
            raise StartupError(f"read operator config: {config_file}: {err.strerror}") from None
        return config_from_document(_load_yaml(text, str(config_file)), str(config_file))
    assert client is not None
    try:
        configmap = await client.get(ConfigMap, configmap_name, namespace=namespace)
    except ApiError as err:
        raise StartupError(
            f"read operator config: ConfigMap {namespace}/{configmap_name}: {err.status.message}"
        ) from None
    stored: str | None = (configmap.data or {}).get(CONFIGMAP_KEY)
    source = f"ConfigMap {namespace}/{configmap_name} key {CONFIGMAP_KEY}"
    return config_from_document(_load_yaml(stored, source) if stored else {}, source)


def _configmap_name(value: str) -> str:
    """A ConfigMap's name is a DNS-1123 subdomain; refuse another before connecting."""
    if not _DNS1123_SUBDOMAIN.fullmatch(value) or len(value) > 253:
        raise click.BadParameter(
            f"{value!r} is not a ConfigMap name (a DNS-1123 subdomain: lowercase letters, "
            "digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return value


def _namespace(explicit: str | None) -> str:
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return _SA_NAMESPACE.read_text().strip()
    except OSError:
        return "ome"


def _client(kubeconfig: Path | None, context: str | None) -> AsyncClient:
    if kubeconfig is not None:
        return AsyncClient(
            config=KubeConfig.from_file(kubeconfig).get(context_name=context),
            field_manager=FIELD_MANAGER,
        )
    return AsyncClient(field_manager=FIELD_MANAGER)


def _metrics_app(metrics: RoutingMetrics) -> web.Application:
    async def metrics_handler(_: web.Request) -> web.Response:
        # written out in a thread: with a series per TrafficMap, a scrape of 30,000 maps
        # takes half a second of Python that would hold the event loop (every poll, watch
        # and reconcile) for all of it; in a thread the loop keeps its turns (the
        # interpreter switches threads every few milliseconds)
        body = await asyncio.to_thread(metrics.exposition)
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    return app


def _probe_app(health: Health) -> web.Application:
    def respond(answered: tuple[int, str]) -> web.Response:
        status, body = answered
        return web.Response(status=status, text=body)

    async def healthz(_: web.Request) -> web.Response:
        return respond(answer("healthz", health.liveness(loop_time())))

    async def readyz(_: web.Request) -> web.Response:
        return respond(answer("readyz", health.readiness()))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def _start_server(app: web.Application, address: tuple[str, int], what: str) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = address
    await web.TCPSite(runner, host, port).start()
    bound = runner.addresses[0][1] if runner.addresses else port
    log.info(f"serving {what}", extra={"address": f"{host}:{bound}"})
    return runner


def _split_address(param: click.Parameter, address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise click.BadParameter(f"{address!r} is not HOST:PORT", param=param)
    return host.strip("[]") or "0.0.0.0", int(port)


async def _serve(options: dict[str, Any]) -> int:
    try:
        settings = ElectionSettings.from_flags(
            options["lease_duration"], options["renew_deadline"], options["retry_period"]
        )
    except ValueError as err:
        log.error("Invalid leader election timing", extra={"error": str(err)})
        return 1
    namespace = _namespace(options["namespace"])
    metrics = RoutingMetrics()
    client: AsyncClient | None = None
    try:
        client = _client(options["kubeconfig"], options["context"])
    except Exception as err:  # a missing kubeconfig is a start-up error, not a traceback
        if options["config"] is None:
            log.error("connect to the API server: %s", err)
            return 1
    try:
        config = await read_config(client, options["config"], namespace, options["config_map"])
    except ConfigError as err:
        for warning in err.warnings:
            log.warning(warning)
        log.error(str(err))
        return 1
    except StartupError as err:
        log.error(str(err))
        return 1
    for warning in config.warnings:
        log.warning(warning)
    try:
        # the operator's CA bundle, client certificate and token, read once here
        trust = prepare(config.trust) if config.routing_active else None
    except TrustError as err:
        log.error(str(ConfigError(str(err))))
        return 1
    if client is None:
        log.error("connect to the API server: no kubeconfig or in-cluster credentials")
        return 1

    # Everything made so far lives as long as the process: keep the collector off it, so
    # that full collections do not stall the polls of thousands of homes; the event loop
    # collects a little and often instead.
    tune_gc()
    # On a multi-cluster control plane the publisher runs even with routing off, as OME's.
    control_plane = config.enabled and config.role == ROLE_CONTROL_PLANE
    health = Health(has_work=control_plane)
    idle: Duration = options["watch_idle_timeout"]
    timing = WatchTiming(idle.seconds, options["min_watch_timeout"].seconds)
    runners: list[web.AppRunner] = []
    servers = (
        (_metrics_app(metrics), options["metrics_address"], "/metrics"),
        (_probe_app(health), options["probe_address"], "/healthz and /readyz"),
    )
    for app, address, what in servers:
        try:
            runners.append(await _start_server(app, address, what))
        except OSError as err:  # the port is taken: a start-up error, not a traceback
            log.error("Failed to start manager", extra={"error": f"serving {what}: {err}"})
            for runner in runners:
                await runner.cleanup()
            await client.close()
            return 1

    async def until_stopped() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        raise _Stopped

    def reconcilers(
        writer: AsyncClient, shards: ShardOwner | None = None
    ) -> dict[str, Coroutine[Any, Any, None]]:
        # one watch and one cache of each kind for both reconcilers
        caches = SharedCaches(writer, timing=timing)
        # with routing off, the publisher only finalizes the maps that are deleted
        publisher = Publisher(writer, config, metrics, caches=caches, timing=timing, shards=shards)
        health.watch(*caches.informers, needed=True)
        health.watch(*publisher.informers)
        work = {"caches": caches.run(), "publisher": publisher.run()}
        if config.routing_active:
            work["routing-controller"] = Controller(
                writer,
                config,
                metrics,
                caches=caches,
                poll_client_factory=lambda budget, limit: PollClient(budget, limit, trust=trust),
                shards=shards,
            ).run()
        return work

    async def lead(writer: AsyncClient) -> None:
        metrics.leader.set(1)
        try:
            await run_together(reconcilers(writer))
        finally:
            metrics.leader.set(0)

    if not config.routing_active:
        log.info(
            "multi-cluster routing is off; set ome.multicluster.enabled, role control-plane and "
            "config.routing.enabled to turn it on"
        )
    if control_plane:
        # OME's manager says what it sets up, with what this build carries
        log.info(
            "Setting up multi-cluster TrafficMap publisher",
            extra={
                "publisher": BUILTIN_PUBLISHER,
                "active": True,
                "availableTrafficMapPublishers": [BUILTIN_PUBLISHER],
            },
        )
        log.info(
            "Setting up multi-cluster TrafficMap routing controller",
            extra={"enabled": config.routing_enabled, "capacityFormats": [FORMAT_REPORT]},
        )
    fenced: AsyncClient | None = None
    tasks: dict[str, Coroutine[Any, Any, None]] = {
        "signals": until_stopped(),
        "gc-pacer": pace_collections(),
    }
    identity = options["identity"] or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    if not control_plane:
        pass  # nothing to do but serve the probes and metrics until stopped
    elif options["sharding"]:
        shard_set = ShardSet(
            client,
            namespace=namespace,
            group=options["lease_name"],
            identity=identity,
            shards=options["shards"],
            settings=settings,
            metrics=metrics,
        )
        health.member_answering = shard_set.answering
        # every write of every replica's work passes the gate of its key's shard
        fenced = FencedClient(ShardGate(), client.config, field_manager=FIELD_MANAGER)
        tasks["shards"] = shard_set.run()
        # subscribed to the shards (in their constructors) before the shards run
        tasks.update(reconcilers(fenced, shard_set))
    elif options["leader_elect"]:
        elector = LeaderElector(
            client,
            namespace=namespace,
            name=options["lease_name"],
            identity=identity,
            settings=settings,
        )
        health.leading = elector.may_write
        health.standby_answering = elector.answering
        # every write of the leader's work passes the elector's gate
        fenced = FencedClient(elector, client.config, field_manager=FIELD_MANAGER)
        writer = fenced
        tasks["leader-election"] = elector.run(lambda: lead(writer))
    else:
        tasks["controller"] = lead(client)
    try:
        await run_together(tasks)
        return 0
    except _Stopped:
        return 0
    except LeadershipLost:
        log.error("Failed to start manager", extra={"error": LOST})
        return 1
    except Exception as err:
        log.error(
            "Failed to start manager",
            extra={"error": str(err) or type(err).__name__, "task": failed_task(err)},
        )
        return 1
    finally:
        for runner in runners:
            await runner.cleanup()
        if fenced is not None:
            await fenced.close()
        await client.close()
        log.info("stopped")


@click.command()
@click.option(
    "--config",
    type=click.Path(exists=False, dir_okay=False, path_type=Path),
    help="A values file or multicluster block; default: the ConfigMap of --config-map.",
)
@click.option(
    "--config-map",
    "config_map",
    default=CONFIGMAP,
    show_default=True,
    callback=lambda _c, _p, v: _configmap_name(v),
    help="The ConfigMap (key multicluster) in --namespace to read without --config; the "
    "chart names its own, OME's manager reads inferenceservice-config.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="KUBECONFIG",
    help="Default: in-cluster credentials, then $KUBECONFIG.",
)
@click.option("--context", default=None, help="The kubeconfig context to use.")
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="The controller's namespace (ConfigMap and Lease); default: $POD_NAMESPACE, then the pod's.",
)
@click.option(
    "--metrics-bind-address",
    "metrics_address",
    default=":8080",
    show_default=True,
    callback=lambda _c, p, v: _split_address(p, v),
    help="The address /metrics is served on.",
)
@click.option(
    "--health-probe-bind-address",
    "probe_address",
    default=":8081",
    show_default=True,
    callback=lambda _c, p, v: _split_address(p, v),
    help="The address /healthz and /readyz are served on.",
)
@click.option(
    "--watch-idle-timeout",
    type=DurationParam(positive=True),
    default="2m30s",
    show_default=True,
    help="List again when a watch brings nothing, not even a bookmark, for this long, in "
    "case its connection died silently; /healthz fails once listing fails too.",
)
@click.option(
    "--min-watch-timeout",
    type=DurationParam(positive=True),
    default="5m",
    show_default=True,
    hidden=True,  # for tests: client-go's reflector has it as a constant
    help="Each watch asks the API server to end it after this long times 1 to 2.",
)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option(
    "--leader-elect-lease-duration",
    "lease_duration",
    type=DurationParam(),
    default=None,
    help="How long the Lease stays valid after its last renewal: the longest a standby waits "
    "before taking over. Supplied with the other two timings or not at all; unset: 15s.",
)
@click.option(
    "--leader-elect-renew-deadline",
    "renew_deadline",
    type=DurationParam(),
    default=None,
    help="How long the leader keeps retrying a failed renewal; past it, it writes nothing "
    "more and exits. Must be shorter than the lease duration; unset: 10s.",
)
@click.option(
    "--leader-elect-retry-period",
    "retry_period",
    type=DurationParam(),
    default=None,
    help="Gap between renewal attempts, and how often a standby looks at the Lease; the "
    "renew deadline must exceed 1.2 times it; unset: 2s.",
)
@click.option(
    "--lease-name",
    default=LEASE_NAME,
    show_default=True,
    help="The leader's Lease; with --sharding, the group its member and shard Leases are "
    "named after.",
)
@click.option(
    "--identity",
    default=None,
    help="This replica's identity in the Lease; default: hostname and a random suffix.",
)
@click.option(
    "--sharding/--no-sharding",
    default=False,
    show_default=True,
    help="Split the routed services into --shards shards, each with a Lease and one writer, "
    "over every replica, instead of electing one leader (ours, not OME's).",
)
@click.option(
    "--shards",
    type=click.IntRange(1, MAX_SHARDS),
    default=DEFAULT_SHARDS,
    show_default=True,
    help=f"With --sharding, how many shards the routed services are split into (1 to "
    f"{MAX_SHARDS}); every replica of a group must use the same number.",
)
@click.option(
    "--log-format", type=click.Choice(["console", "json"]), default="console", show_default=True
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def controller(**options: Any) -> None:
    """Run the routing controller: one TrafficMap per routed InferenceService."""
    configure(options["log_format"], options["log_level"])
    # uvloop's event loop where it is installed (cheaper polls), asyncio's otherwise
    sys.exit(eventloop.run(_serve(options)))
