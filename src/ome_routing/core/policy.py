"""One InferenceService's routing policy: its `spec.routing`, resolved against the chart.

- `spec.routing.capacity` replaces the chart's poll as a whole: fields are never merged.
  `capacity: {disabled: true}` turns polling off for the service whatever the chart sets;
  without a block the chart's poll applies; without either there is no poll.
- `spec.routing.capacityFactors` maps WorkloadCluster names to positive quantities.
- `spec.routing.enabled: false` takes the service out of routing. Its other blocks are
  then not judged: a service on its way out must not be held back by a mistake in a
  poll it will never run.

The poll rules are `core.config`'s, shared with the chart's poll. Rules intrinsic to the
block fail with `validate routing policy: ...`; rules that depend on this build or the
chart (the format registry, the observer limits) fail with `resolve capacity policy: ...`.
Every intrinsic rule is judged before any that depends on the build.

Errors: `PolicyError` (a `ValueError`); `str(error)` is the whole log line, and `stage`
tells the two kinds apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from ome_routing.core.config import OperatorConfig
from ome_routing.core.pollrules import (
    CAPACITY_FIELDS,
    REQUIRED_CAPACITY_FIELDS,
    CapacityPolicy,
    CapacityRuleError,
    RuleStage,
    check_capacity_bounds,
    invalid,
    parse_capacity,
    read_bool,
    read_mapping,
    reject_unknown_fields,
    show,
)
from ome_routing.core.quantity import Quantity, QuantityError, parse_quantity

VALIDATE_PREFIX = "validate routing policy: "
RESOLVE_PREFIX = "resolve capacity policy: "
#: The API server's message for an incomplete poll (the CRD's CEL rule), word for word.
INCOMPLETE_POLL = (
    "an enabled capacity poll must specify path, method, format, period, timeout, "
    "samples, quorum, and maxAge"
)

ROUTING_FIELD = "spec.routing"
CAPACITY_FIELD = "spec.routing.capacity"
FACTORS_FIELD = "spec.routing.capacityFactors"
ROUTING_FIELDS: tuple[str, ...] = ("enabled", "capacityFactors", "capacity", "probe", "publisher")

_PREFIXES = {RuleStage.VALIDATE: VALIDATE_PREFIX, RuleStage.RESOLVE: RESOLVE_PREFIX}


class PolicyError(ValueError):
    """A `spec.routing` block that cannot be used; `str(error)` is the whole log line."""

    def __init__(self, stage: RuleStage, detail: str) -> None:
        super().__init__(_PREFIXES[stage] + detail)
        self.stage = stage
        self.detail = detail


class PollMode(StrEnum):
    """Where a service's capacity poll comes from, if it has one."""

    SERVICE = "Service"  # its own spec.routing.capacity
    CHART = "Chart"  # the chart's routing.capacity
    DISABLED = "Disabled"  # spec.routing.capacity.disabled: true
    NOT_CONFIGURED = "NotConfigured"  # neither the service nor the chart sets a poll


@dataclass(frozen=True, slots=True)
class RoutingPolicy:
    """A service's resolved routing policy."""

    #: spec.routing.enabled; a service is routed unless it opts out.
    enabled: bool
    #: The poll to run, None when `poll_mode` is DISABLED or NOT_CONFIGURED.
    capacity: CapacityPolicy | None
    #: Where the poll comes from; NOT_CONFIGURED for a service that opts out of routing.
    poll_mode: PollMode
    #: WorkloadCluster name -> factor; a cluster absent from the map counts as 1.
    capacity_factors: Mapping[str, Quantity]
    #: spec.routing.probe, raw, for the probe policy to judge.
    probe: Mapping[str, Any] | None
    #: spec.routing.publisher, raw, for the publisher to judge.
    publisher: Mapping[str, Any] | None = None

    @property
    def polls(self) -> bool:
        return self.capacity is not None


def _service_capacity(value: object) -> CapacityPolicy | None:
    """The service's own poll, None for `disabled: true`; intrinsic rules only."""
    block = read_mapping(value, CAPACITY_FIELD)
    reject_unknown_fields(block, CAPACITY_FIELD, ("disabled", *CAPACITY_FIELDS))
    disabled_value = block.get("disabled")
    disabled = (
        False if disabled_value is None else read_bool(disabled_value, f"{CAPACITY_FIELD}.disabled")
    )
    poll = {name: v for name, v in block.items() if name != "disabled" and v is not None}
    if disabled:
        if poll:
            raise invalid(
                f"{CAPACITY_FIELD}.disabled must not be combined with capacity poll fields "
                f"(also set: {', '.join(poll)})",
            )
        return None
    if any(name not in poll for name in REQUIRED_CAPACITY_FIELDS):
        raise invalid(INCOMPLETE_POLL)
    return parse_capacity(poll, CAPACITY_FIELD)


def _factors(value: object) -> Mapping[str, Quantity]:
    if value is None:
        return MappingProxyType({})
    block = read_mapping(value, FACTORS_FIELD)
    factors: dict[str, Quantity] = {}
    for name, raw in block.items():
        if not isinstance(name, str) or not name:
            raise invalid(f"{FACTORS_FIELD} key {show(name)} must be a WorkloadCluster name")
        field_name = f"{FACTORS_FIELD}[{show(name)}]"
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise invalid(f'{field_name} must be a quantity such as "1.5", got {show(raw)}')
        text = raw if isinstance(raw, str) else str(raw)
        try:
            quantity = parse_quantity(text)
        except QuantityError as err:
            raise invalid(f"{field_name}: {err}") from None
        if quantity.value <= 0:
            raise invalid(f"{field_name} must be positive, got {show(text)}")
        factors[name] = quantity
    return MappingProxyType(dict(sorted(factors.items())))


def _raw(value: object, field_name: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return MappingProxyType(dict(read_mapping(value, field_name)))


def _resolve(routing: Mapping[str, Any] | None, config: OperatorConfig) -> RoutingPolicy:
    if routing is None:
        routing = {}
    routing = read_mapping(routing, ROUTING_FIELD)
    reject_unknown_fields(routing, ROUTING_FIELD, ROUTING_FIELDS)
    enabled_value = routing.get("enabled")
    enabled = (
        True if enabled_value is None else read_bool(enabled_value, f"{ROUTING_FIELD}.enabled")
    )
    if not enabled:
        return RoutingPolicy(
            enabled=False,
            capacity=None,
            poll_mode=PollMode.NOT_CONFIGURED,
            capacity_factors=MappingProxyType({}),
            probe=None,
        )

    # Every intrinsic rule first, then the rules that depend on this build and the chart.
    capacity_value = routing.get("capacity")
    own = None if capacity_value is None else _service_capacity(capacity_value)
    factors = _factors(routing.get("capacityFactors"))
    probe = _raw(routing.get("probe"), f"{ROUTING_FIELD}.probe")
    publisher = _raw(routing.get("publisher"), f"{ROUTING_FIELD}.publisher")

    capacity: CapacityPolicy | None
    if capacity_value is None:
        capacity = config.capacity
        mode = PollMode.NOT_CONFIGURED if capacity is None else PollMode.CHART
    elif own is None:
        capacity, mode = None, PollMode.DISABLED
    else:
        check_capacity_bounds(own, CAPACITY_FIELD, config.observer)
        capacity, mode = own, PollMode.SERVICE
    return RoutingPolicy(
        enabled=True,
        capacity=capacity,
        poll_mode=mode,
        capacity_factors=factors,
        probe=probe,
        publisher=publisher,
    )


def resolve_routing_policy(
    routing: Mapping[str, Any] | None, config: OperatorConfig
) -> RoutingPolicy:
    """Resolve an InferenceService's `spec.routing` (None when it has none) under `config`.

    Raises `PolicyError`, whose text is the line the controller logs.
    """
    try:
        return _resolve(routing, config)
    except CapacityRuleError as err:
        raise PolicyError(err.stage, err.detail) from None
