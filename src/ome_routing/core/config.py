"""The operator's multi-cluster configuration: the chart values under `ome.multicluster`.

The controller reads these values once, when it starts, and refuses to start with an
unusable setting. The error starts with `invalid multi-cluster configuration: ` and
names the setting as the values file spells it (`routing.capacity.period`,
`routing.observer.maxSamples`) together with its value.

The checks run in OME's order, so that the same values give the same error:

1. The gates (`enabled`, `role`, `routing.enabled`) are always read. With
   multi-cluster off, nothing else is: OME does not load the block at all.
2. Load: every routing block is read by type; a value of the wrong type fails here,
   with OME's prefix for a block it cannot decode, `load multi-cluster configuration:
   unable to parse multicluster config json: `. (A number where a duration belongs,
   `period: 10`, reads as its digits, so that it gets the duration's own message.) A
   key that OME does not know is not an error (OME's loader ignores it), but it is
   returned in `warnings`, one line each, so that a typo such as `peroid` does not
   pass silently.
3. Durations: every duration that is set is parsed, in the byte order of its key
   (`routing.capacity.maxAge` before `routing.capacity.period`); all of their errors
   are reported together, one per line, as OME joins them. Then
   `routing.publisher.resyncInterval`.
4. Routing rules, only with `routing.enabled: true` (whatever the role, as OME): the
   observer limits, then our transport settings of `routing.observer`
   (`core.trustrules`; not OME's, off by default), then the chart's probe (see `core.proberules`) and its period
   against `minPeriod`, then the chart's poll (see `core.pollrules`), then the poll
   against the limits. The first failure is the one reported. A poll without a
   `path` is off, and its other fields are not judged.

Routing runs (`routing_active`) only with `enabled: true`, `role: control-plane` and
`routing.enabled: true`; only then does the config carry the chart's poll and limits.

Steps 2 and 3 (the load, the unknown keys, the durations) are `core.config_load`'s.

Errors:
- `ConfigError` (a `ValueError`): the operator configuration is unusable; `str(error)` is
  the whole message, `invalid multi-cluster configuration: <detail>` (or the load prefix
  above), where `detail` may hold several lines (joined duration errors). `warnings`
  holds the unknown-key lines, which explain many errors (`peroid` leaves no period).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ome_routing.core.config_load import (
    DEFAULT_RESYNC_INTERVAL,
    PUBLISHER_FIELD,
    check_resync,
    duration_problems,
    load_blocks,
    optional_bool,
    unknown_key_warnings,
)
from ome_routing.core.durations import Duration
from ome_routing.core.endpoint import (
    EndpointConfig,
    endpoint_problems,
    publisher_problem,
)
from ome_routing.core.fields import (
    CapacityRuleError,
    invalid,
    read_mapping,
    read_string,
    read_string_map,
    show,
)
from ome_routing.core.hosttemplate import HostTemplateError
from ome_routing.core.journalrules import read_journal
from ome_routing.core.pollrules import (
    CHART_CAPACITY_FIELD,
    CapacityPolicy,
    ObserverLimits,
    bounds_problem,
    check_observer,
    poll_problem,
)
from ome_routing.core.proberules import (
    ProbePolicy,
    probe_bounds_problem,
    probe_problem,
)
from ome_routing.core.ramps import MaxIncrease, RampSettingError, load_ramp
from ome_routing.core.trustrules import TrustSettings, load_trust

__all__ = [
    "CHART_CAPACITY_FIELD",
    "CONFIG_ERROR_PREFIX",
    "DEFAULT_RESYNC_INTERVAL",
    "LOAD_ERROR_PREFIX",
    "ROLES",
    "ROLE_CONTROL_PLANE",
    "ConfigError",
    "OperatorConfig",
    "config_from_multicluster",
    "config_from_values",
]

CONFIG_ERROR_PREFIX = "invalid multi-cluster configuration: "
#: OME's prefix when the block cannot be decoded: a routing value of the wrong type.
LOAD_ERROR_PREFIX = "load multi-cluster configuration: unable to parse multicluster config json: "
ROLE_CONTROL_PLANE = "control-plane"
#: The roles the controller accepts; empty means "not the control plane".
ROLES: tuple[str, ...] = ("", ROLE_CONTROL_PLANE)


class ConfigError(ValueError):
    """The multi-cluster configuration is unusable; `str(error)` is the whole message."""

    def __init__(
        self, detail: str, warnings: tuple[str, ...] = (), prefix: str = CONFIG_ERROR_PREFIX
    ) -> None:
        super().__init__(prefix + detail)
        self.detail = detail
        self.warnings = warnings
        self.prefix = prefix


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """The chart's `ome.multicluster` values, validated.

    `capacity` is the chart's poll, None without one (and always None while routing is
    not active). `probe` and `publisher` are kept raw for the modules that read them.
    """

    enabled: bool = False
    role: str = ""
    routing_enabled: bool = False
    capacity: CapacityPolicy | None = None
    observer: ObserverLimits = field(default_factory=ObserverLimits)
    probe: Mapping[str, Any] | None = None
    publisher: Mapping[str, Any] | None = None
    #: The chart's health probe, validated; None without one (an empty `path` turns it
    #: off, as in OME) and while routing is not active.
    probe_policy: ProbePolicy | None = None
    #: `routing.publisher.resyncInterval`: how often the publisher reconciles its state
    #: without an event. The chart's default, 1m, when left out.
    resync_interval: Duration = DEFAULT_RESYNC_INTERVAL
    #: One line per key the controller ignores, for the log and validate-config.
    warnings: tuple[str, ...] = ()
    #: `endpoint.*`: where and how the publisher publishes (off by default).
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    #: Not OME: `routing.observer`'s transport settings for polls and probes (CA bundle,
    #: client certificate, bearer token, allowed and denied addresses); all off by default,
    #: which is OME's behaviour. Their files are read by `observer.trust`.
    trust: TrustSettings = field(default_factory=TrustSettings)
    #: Not OME: `routing.journal.enabled`, an Event on the TrafficMap for each change of
    #: a home's weight (`core.journalrules`); off by default, which is OME's behaviour.
    journal: bool = False
    #: Not OME: `routing.shadow` (the chart's `shadowRouting`), a candidate `spec.routing`
    #: that every service without its own shadow annotation is also judged by, never
    #: published (`core.shadow`). Off (None) by default, as an empty block is.
    shadow: Mapping[str, Any] | None = None
    #: Not OME: `routing.ramp.maxIncreasePerPeriod`, the chart-wide ramp (`core.ramps`);
    #: None, the default, publishes every weight at once, as OME does.
    ramp: MaxIncrease | None = None

    @property
    def routing_active(self) -> bool:
        """Routing runs only on a multi-cluster control plane with routing turned on."""
        return self.enabled and self.role == ROLE_CONTROL_PLANE and self.routing_enabled


# --- the whole configuration ---------------------------------------------------------


class _LoadFailure(Exception):
    """A routing block of the wrong shape: OME fails to decode the configuration."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _build(block: Mapping[str, Any]) -> OperatorConfig:
    enabled = optional_bool(block, "enabled", "multicluster.enabled")
    role_value = block.get("role")
    role = "" if role_value is None else read_string(role_value, "multicluster.role")
    if role not in ROLES:
        raise invalid(f'multicluster.role {show(role)} must be "{ROLE_CONTROL_PLANE}" or empty')
    try:
        loaded = load_blocks(block)
    except CapacityRuleError as err:
        if not enabled:  # OME does not read the block at all
            return OperatorConfig(enabled=enabled, role=role)
        raise _LoadFailure(err.detail) from None
    except HostTemplateError as err:
        if not enabled:
            return OperatorConfig(enabled=enabled, role=role)
        raise invalid(str(err)) from None
    routing_enabled = loaded.routing_enabled
    if not enabled:
        return OperatorConfig(enabled=enabled, role=role, routing_enabled=routing_enabled)

    # Durations: every syntax error at once, then the publisher's resync.
    problems = duration_problems(loaded.durations)
    resync, resync_problem = check_resync(loaded.resync_text, routing_enabled)
    if resync_problem is not None:
        problems.append(resync_problem)
    problems.extend(endpoint_problems(loaded.endpoint))
    if problems:
        raise invalid("\n".join(problems))

    off = OperatorConfig(
        enabled=enabled,
        role=role,
        routing_enabled=routing_enabled,
        resync_interval=resync,
        endpoint=loaded.endpoint,
    )
    if not routing_enabled:
        return off

    # Routing rules: the first failure wins.
    limits = check_observer(loaded.observer)
    trust = load_trust(loaded.observer_block)
    ramp = _ramp(block)
    probe = loaded.probe_fields
    if probe.enabled:
        probe_error = probe_problem(probe) or probe_bounds_problem(probe, limits)
        if probe_error is not None:
            raise invalid(probe_error)
    poll = loaded.poll
    if poll.enabled:
        problem = poll_problem(poll) or bounds_problem(poll, limits)
        if problem is not None:
            raise invalid(problem)
    if not off.routing_active:
        return off
    publisher_block = loaded.publisher or {}
    problem = publisher_problem(
        str(publisher_block.get("name") or ""),
        read_string_map(publisher_block.get("options"), f"{PUBLISHER_FIELD}.options"),
    )
    if problem is not None:
        raise invalid(problem)
    return OperatorConfig(
        enabled=enabled,
        role=role,
        routing_enabled=routing_enabled,
        capacity=poll.policy() if poll.enabled else None,
        observer=limits,
        trust=trust,
        ramp=ramp,
        probe=loaded.probe,
        probe_policy=probe.policy() if probe.enabled else None,
        publisher=loaded.publisher,
        resync_interval=resync,
        endpoint=loaded.endpoint,
        journal=read_journal(block),
        shadow=loaded.shadow or None,
    )


def _ramp(block: Mapping[str, Any]) -> MaxIncrease | None:
    """`routing.ramp` (ours), checked with the routing rules."""
    config = block.get("config")
    routing = config.get("routing") if isinstance(config, Mapping) else None
    try:
        return load_ramp(routing.get("ramp") if isinstance(routing, Mapping) else None)
    except RampSettingError as err:
        raise invalid(str(err)) from None


# OME resolves each workload cluster's Gateway to IP addresses for these slices; this
# build has no connection to workload clusters, so it publishes without them (our words).
IP_ENDPOINT_SLICES_NOT_BUILT = (
    "endpoint.gatewayBackend.endpointSlices.enabled is true, but this build does not "
    "resolve workload clusters' Gateway addresses: backends stay ExternalName Services "
    "with no EndpointSlices (for gateways that refuse ExternalName, use "
    "endpoint.gatewayBackend.hostnameEndpointSlices)"
)


def _checked(block: Mapping[str, Any]) -> OperatorConfig:
    warnings = unknown_key_warnings(block) if block.get("enabled") is True else ()
    try:
        config = _build(block)
    except _LoadFailure as failure:
        raise ConfigError(failure.detail, warnings, LOAD_ERROR_PREFIX) from None
    except CapacityRuleError as err:
        raise ConfigError(err.detail, warnings) from None
    if config.routing_active and config.endpoint.endpoint_slices_enabled:
        warnings = (*warnings, IP_ENDPOINT_SLICES_NOT_BUILT)
    return replace(config, warnings=warnings)


def config_from_multicluster(block: Mapping[str, Any] | None) -> OperatorConfig:
    """Validate the `multicluster` block alone (`enabled`, `role`, `config`).

    Raises `ConfigError`. A missing (None) block means multi-cluster is off.
    """
    if block is None:
        return OperatorConfig()
    try:
        multicluster = read_mapping(block, "multicluster")
    except CapacityRuleError as err:
        raise ConfigError(err.detail) from None
    return _checked(multicluster)


def config_from_values(values: Mapping[str, Any]) -> OperatorConfig:
    """Validate a whole Helm values file; without `ome.multicluster`, multi-cluster is off.

    Raises `ConfigError`.
    """
    try:
        ome = values.get("ome")
        if ome is None:
            return OperatorConfig()
        multicluster = read_mapping(ome, "ome").get("multicluster")
        if multicluster is None:
            return OperatorConfig()
        block = read_mapping(multicluster, "ome.multicluster")
    except CapacityRuleError as err:
        raise ConfigError(err.detail) from None
    return _checked(block)
