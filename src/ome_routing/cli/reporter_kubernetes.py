"""The options of `ome-routing reporter --kubernetes`, and running it.

Kept apart from `cli.reporter` so the fixed-count reporter stays small: `kubernetes_options`
adds the options to that command, and `run_kubernetes` runs the Kubernetes-backed reporter
(`reporter.kubernetes`) when `--kubernetes` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from lightkube import AsyncClient, KubeConfig

from ome_routing.cli.params import DurationParam
from ome_routing.core.durations import Duration
from ome_routing.reporter.kubernetes import HealthSettings, KubernetesReporter, serve

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--kubernetes",
        is_flag=True,
        help="Count the replicas of every InferenceService of this cluster from its API.",
    ),
    click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="With --kubernetes: the kubeconfig to use instead of in-cluster credentials.",
    ),
    click.option("--context", help="With --kubeconfig: the context to use."),
    click.option(
        "--health-path",
        help="With --kubernetes: count only pods whose model server answers this path with 2xx.",
    ),
    click.option(
        "--health-timeout",
        type=DurationParam(positive=True),
        default="1s",
        show_default=True,
        help="How long a health check may take.",
    ),
    click.option(
        "--health-period",
        type=DurationParam(positive=True),
        default="5s",
        show_default=True,
        help="How often each pod is checked, at most.",
    ),
    click.option(
        "--health-port",
        type=click.IntRange(1, 65535),
        default=8080,
        show_default=True,
        help="The model server's port when the pod declares none "
        "(runtime.ome.io/probe-port, else its first container port).",
    ),
    click.option(
        "--watch-idle-timeout",
        type=DurationParam(positive=True),
        default="30s",
        show_default=True,
        help="With --kubernetes: list again when a watch brings nothing for this long, "
        "in case its connection died silently; counts are not re-stamped meanwhile.",
    ),
    click.option(
        "--health-concurrency",
        type=click.IntRange(min=1),
        default=16,
        show_default=True,
        help="How many health checks run at once.",
    ),
)


def kubernetes_options(command: F) -> F:
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def _client(kubeconfig: Path | None, context: str | None) -> AsyncClient:
    if kubeconfig is not None:
        config = KubeConfig.from_file(kubeconfig).get(context_name=context)
    else:
        # In-cluster credentials, else $KUBECONFIG or ~/.kube/config. Passed explicitly:
        # with trust_env=False (no proxy), lightkube would read ~/.kube/config only.
        config = KubeConfig.from_env().get()
    return AsyncClient(config=config, trust_env=False)


def run_kubernetes(
    host: str,
    port: int,
    path: str,
    options: dict[str, Any],
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Run the Kubernetes-backed reporter until interrupted."""
    timeout: Duration = options["health_timeout"]
    period: Duration = options["health_period"]
    health = None
    if options["health_path"] is not None:
        if not options["health_path"].startswith("/"):
            raise click.BadParameter(
                f"{options['health_path']!r} must start with /", param_hint="--health-path"
            )
        if not timeout < period:
            raise click.BadParameter(
                f"--health-timeout ({timeout}) must be shorter than --health-period ({period})",
                param_hint="--health-timeout",
            )
        health = HealthSettings(
            options["health_path"],
            timeout=timeout.seconds,
            period=period.seconds,
            concurrency=options["health_concurrency"],
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    async def main() -> None:
        try:
            client = _client(options["kubeconfig"], options["context"])
        except Exception as err:  # no kubeconfig and no in-cluster credentials
            raise click.ClickException(f"connect to the API server: {err}") from None
        idle: Duration = options["watch_idle_timeout"]
        reporter = KubernetesReporter(
            client,
            poll_path=path,
            health=health,
            default_port=options["health_port"],
            watch_idle_timeout=idle.seconds,
        )
        try:
            await serve(reporter, host, port, ssl_context=ssl_context)
        finally:
            await client.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
