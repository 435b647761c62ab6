"""The operator's multi-cluster configuration: the chart values under `ome.multicluster`.

The controller reads these values once, when it starts, and refuses to start with an
unusable setting. Every startup error is one line that starts with
`invalid multi-cluster configuration: ` and names the setting as the values file spells
it (`routing.capacity.period`, `routing.observer.maxSamples`) together with its value.

The capacity poll's rules live in `core.pollrules`, shared with a service's
`spec.routing.capacity` (see `core.policy`).

Routing is active only with `enabled: true`, `role: control-plane` and
`config.routing.enabled: true`. While it is not, the routing blocks (`capacity`,
`observer`, `probe`, `publisher`) are not judged at all: a half-written poll in a values
file must not stop a controller that will never poll. The gates themselves
(`enabled`, `role`, `routing.enabled`) are always checked.

Errors:
- `ConfigError` (a `ValueError`): the operator configuration is unusable; `str(error)` is
  the whole log line, `invalid multi-cluster configuration: <detail>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import (
    CAPACITY_FIELDS,
    OBSERVER_FIELD,
    CapacityPolicy,
    CapacityRuleError,
    ObserverLimits,
    RuleStage,
    check_capacity_bounds,
    invalid,
    parse_capacity,
    read_bool,
    read_duration,
    read_mapping,
    read_string,
    read_whole_number,
    reject_unknown_fields,
    show,
)

CONFIG_ERROR_PREFIX = "invalid multi-cluster configuration: "
ROLE_CONTROL_PLANE = "control-plane"
#: The roles the controller accepts; empty means "not the control plane".
ROLES: tuple[str, ...] = ("", ROLE_CONTROL_PLANE)

#: Field prefixes as users spell them: in the chart values, and in an InferenceService.
CHART_CAPACITY_FIELD = "routing.capacity"


class ConfigError(ValueError):
    """The multi-cluster configuration is unusable; `str(error)` is the whole log line."""

    def __init__(self, detail: str) -> None:
        super().__init__(CONFIG_ERROR_PREFIX + detail)
        self.detail = detail


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

    @property
    def routing_active(self) -> bool:
        """Routing runs only on a multi-cluster control plane with routing turned on."""
        return self.enabled and self.role == ROLE_CONTROL_PLANE and self.routing_enabled


# --- the observer limits --------------------------------------------------------------

#: values key -> (ObserverLimits attribute, is a duration)
_OBSERVER_LIMITS: dict[str, tuple[str, bool]] = {
    "maxConcurrentReconciles": ("max_concurrent_reconciles", False),
    "maxConcurrentRequests": ("max_concurrent_requests", False),
    "maxResponseBytes": ("max_response_bytes", False),
    "minPeriod": ("min_period", True),
    "maxSamples": ("max_samples", False),
}
_MISSING = object()


def parse_observer(value: object) -> ObserverLimits:
    """Read `routing.observer`; `_MISSING` (the block left out) keeps every default.

    An explicit null block removes all five limits, as Helm's null does, and so fails on
    the first of them.
    """
    if value is _MISSING:
        return ObserverLimits()
    block: Mapping[str, Any] = (
        dict.fromkeys(_OBSERVER_LIMITS) if value is None else read_mapping(value, OBSERVER_FIELD)
    )
    reject_unknown_fields(block, OBSERVER_FIELD, _OBSERVER_LIMITS)
    limits: dict[str, Any] = {}
    for key, (attribute, is_duration) in _OBSERVER_LIMITS.items():
        if key not in block:
            continue
        field = f"{OBSERVER_FIELD}.{key}"
        raw = block[key]
        positive = f"{field} must be positive when routing is enabled"
        if raw is None:
            raise invalid(positive)
        limit: int | Duration
        if is_duration:
            limit = read_duration(raw, field)
            magnitude = limit.nanoseconds
        else:
            limit = read_whole_number(raw, field)
            magnitude = limit
        if magnitude <= 0:
            raise invalid(positive)
        limits[attribute] = limit
    return ObserverLimits(**limits)


# --- the whole configuration ---------------------------------------------------------


def _chart_capacity(value: object, limits: ObserverLimits) -> CapacityPolicy | None:
    """The chart's poll: none without a block or a `path`; with a path, a complete poll."""
    field = CHART_CAPACITY_FIELD
    if value is None:
        return None
    block = read_mapping(value, field)
    reject_unknown_fields(block, field, CAPACITY_FIELDS)
    if block.get("path") in (None, ""):
        others = [n for n in CAPACITY_FIELDS if n != "path" and block.get(n) is not None]
        if others:
            raise CapacityRuleError(
                RuleStage.VALIDATE,
                f"{field} sets {', '.join(others)} but not path: set {field}.path "
                "to turn the poll on, or remove the block",
            )
        return None
    policy = parse_capacity(block, field)
    check_capacity_bounds(policy, field, limits)
    return policy


def _raw_block(value: object, field: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return MappingProxyType(dict(read_mapping(value, field)))


def _optional_bool(block: Mapping[str, Any], key: str, field: str) -> bool:
    value = block.get(key)
    return False if value is None else read_bool(value, field)


def _build(block: Mapping[str, Any]) -> OperatorConfig:
    enabled = _optional_bool(block, "enabled", "multicluster.enabled")
    role_value = block.get("role")
    role = "" if role_value is None else read_string(role_value, "multicluster.role")
    if role not in ROLES:
        raise invalid(f'multicluster.role {show(role)} must be "{ROLE_CONTROL_PLANE}" or empty')
    config_value = block.get("config")
    config = {} if config_value is None else read_mapping(config_value, "config")
    routing_value = config.get("routing")
    routing = {} if routing_value is None else read_mapping(routing_value, "routing")
    routing_enabled = _optional_bool(routing, "enabled", "routing.enabled")
    off = OperatorConfig(enabled=enabled, role=role, routing_enabled=routing_enabled)
    if not off.routing_active:
        return off
    observer = parse_observer(routing.get("observer", _MISSING))
    return OperatorConfig(
        enabled=enabled,
        role=role,
        routing_enabled=routing_enabled,
        capacity=_chart_capacity(routing.get("capacity"), observer),
        observer=observer,
        probe=_raw_block(routing.get("probe"), "routing.probe"),
        publisher=_raw_block(routing.get("publisher"), "routing.publisher"),
    )


def config_from_multicluster(block: Mapping[str, Any] | None) -> OperatorConfig:
    """Validate the `multicluster` block alone (`enabled`, `role`, `config`).

    Raises `ConfigError`. A missing (None) block means multi-cluster is off.
    """
    if block is None:
        return OperatorConfig()
    try:
        return _build(read_mapping(block, "multicluster"))
    except CapacityRuleError as err:
        raise ConfigError(err.detail) from None


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
        return _build(read_mapping(multicluster, "ome.multicluster"))
    except CapacityRuleError as err:
        raise ConfigError(err.detail) from None
