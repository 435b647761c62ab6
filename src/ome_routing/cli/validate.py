"""`ome-routing validate-config`: check a values file as the controller checks it at startup.

Exit 0 with a one-line summary when the multi-cluster configuration is usable, followed,
when the chart sets a poll, by the poll's convergence bounds (`core.convergence`), one
line each; exit 1 with the controller's own `invalid multi-cluster configuration: ...`
line on stderr when it is not. A file that cannot be read is a usage error (exit 2); one that is not
YAML, or whose top level is not a mapping, exits 1. The files that `routing.observer`'s
transport settings name (CA bundle, client certificate and key, bearer token) are read
as the controller reads them, so run it where they are (in the controller's pod, or with
local copies at the same paths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

import click
import yaml

from ome_routing.core.config import (
    ROLE_CONTROL_PLANE,
    ConfigError,
    OperatorConfig,
    config_from_values,
)
from ome_routing.core.convergence import bounds, describe
from ome_routing.core.pollrules import CapacityPolicy, ObserverLimits
from ome_routing.core.shadow import checked_config
from ome_routing.core.trustrules import TrustSettings
from ome_routing.observer.trust import TrustError, prepare

VALID_PREFIX = "multi-cluster configuration is valid: "


def merge_values(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two values files as Helm merges `-f a.yaml -f b.yaml`: the later one wins,
    mappings merge key by key, and an explicit null is kept (the controller sees it)."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_values(current, value)
        else:
            merged[key] = value
    return merged


def _poll(policy: CapacityPolicy) -> str:
    return (
        f"chart poll {policy.method} {policy.path}, format {policy.format}, "
        f"samples {policy.samples}, quorum {policy.quorum}, period {policy.period}, "
        f"timeout {policy.timeout}, maxAge {policy.max_age}"
    )


def _limits(limits: ObserverLimits) -> str:
    return (
        f"observer limits maxConcurrentReconciles {limits.max_concurrent_reconciles}, "
        f"maxConcurrentRequests {limits.max_concurrent_requests}, "
        f"maxResponseBytes {limits.max_response_bytes}, minPeriod {limits.min_period}, "
        f"maxSamples {limits.max_samples}"
    )


def summarize(config: OperatorConfig) -> str:
    """One line that says what the controller would run with."""
    if not config.routing_active:
        gates = []
        if not config.enabled:
            gates.append("multicluster.enabled is not true")
        if config.role != ROLE_CONTROL_PLANE:
            gates.append(f"multicluster.role is not {ROLE_CONTROL_PLANE}")
        if not config.routing_enabled:
            gates.append("routing.enabled is not true")
        return f"{VALID_PREFIX}routing off ({'; '.join(gates)}); {_checked(config)}"
    poll = "no chart poll" if config.capacity is None else _poll(config.capacity)
    return f"{VALID_PREFIX}routing on; {poll}; {_limits(config.observer)}"


def _checked(config: OperatorConfig) -> str:
    """How much of the routing block the controller judged, with routing off (as OME)."""
    if not config.enabled:
        return "routing blocks not checked"
    if not config.routing_enabled:
        return "only the syntax of routing durations checked"
    return "routing blocks checked"


def probe_lines(config: OperatorConfig) -> list[str]:
    """The chart's health probe, one line; none without one."""
    probe = config.probe_policy
    if probe is None:
        return []
    accept = " ".join(str(s) for s in probe.accept_statuses)
    gate = " ".join(str(s) for s in probe.gate_statuses)
    return [
        f"chart probe {probe.method} {probe.path}, acceptStatuses [{accept}], "
        f"gateStatuses [{gate}], period {probe.period}, timeout {probe.timeout}, "
        f"failureThreshold {probe.failure_threshold}, "
        f"successThreshold {probe.success_threshold}, allFailedPolicy {probe.all_failed_policy}"
    ]


def trust_lines(config: OperatorConfig) -> list[str]:
    """Our transport settings of polls and probes, one line; none when all are off."""
    trust = config.trust
    if trust.default:
        return []
    parts = [f"{field.rpartition('.')[2]} {path}" for field, path in trust.files()]
    for name, networks in (("allowCIDRs", trust.allow), ("denyCIDRs", trust.deny)):
        if networks:
            parts.append(f"{name} [{' '.join(str(n) for n in networks)}]")
    return [f"poll transport: {', '.join(parts)}"]


def check_trust_files(settings: TrustSettings) -> None:
    """Read the transport settings' files as the controller does when it starts.

    Raises `ConfigError` naming the field and the file.
    """
    try:
        prepare(settings)
    except TrustError as err:
        raise ConfigError(str(err)) from None


def convergence_lines(config: OperatorConfig) -> list[str]:
    """The chart poll's convergence bounds, one line each; none without a chart poll."""
    poll = config.capacity
    if poll is None:
        return []
    found = bounds(poll.samples, poll.quorum, poll.period, poll.max_age)
    return [f"chart poll convergence: {line}" for line in describe(found)]


def _load(stream: IO[str]) -> Mapping[str, Any]:
    name = getattr(stream, "name", "-")
    try:
        document = yaml.safe_load(stream)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        raise click.ClickException(f"{name} is not valid YAML{where}: {err.problem}") from None
    except yaml.YAMLError as err:
        raise click.ClickException(f"{name} is not valid YAML: {err}") from None
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise click.ClickException(
            f"{name} must hold a mapping of values at the top level, "
            f"got a {type(document).__name__}"
        )
    return document


@click.command("validate-config")
@click.option(
    "-f",
    "--values",
    "files",
    type=click.File("r", encoding="utf-8"),
    multiple=True,
    required=True,
    help="A Helm values file for the ome-resources chart ('-' for stdin); "
    "repeat to merge several, the later winning, as Helm does.",
)
@click.pass_context
def validate_config(ctx: click.Context, files: tuple[IO[str], ...]) -> None:
    """Check the chart's multi-cluster values as the controller does when it starts."""
    values: dict[str, Any] = {}
    for stream in files:
        values = merge_values(values, _load(stream))
    try:
        config = checked_config(config_from_values(values))
        if config.routing_active:
            check_trust_files(config.trust)
    except ConfigError as err:
        click.echo("".join(f"{line}\n" for line in err.warnings) + str(err), err=True)
        ctx.exit(1)
    for line in config.warnings:
        click.echo(line, err=True)
    click.echo(summarize(config))
    for line in [*probe_lines(config), *trust_lines(config), *convergence_lines(config)]:
        click.echo(line)
