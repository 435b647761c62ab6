"""One InferenceService's routing policy: its `spec.routing`, resolved against the chart.

- `spec.routing.capacity` replaces the chart's poll as a whole: fields are never merged.
  `capacity: {disabled: true}` turns polling off for the service whatever the chart sets;
  without a block the chart's poll applies; without either there is no poll.
- `spec.routing.capacityFactors` maps WorkloadCluster names to positive quantities.
  (OME 2af192b3 has no `spec.placement.capacityFactors`: it is neither read nor checked.)
- `spec.routing.enabled: false` takes the service out of routing. Its other blocks are
  then not judged: a service on its way out must not be held back by a mistake in a
  poll it will never run.

Validation runs in OME's order, and the first failure wins, as `validate routing
policy: ...`: the capacity factors, then the probe (`core.proberules`, OME's
per-service rules), then the capacity block (OME's per-service rules, where a zero value counts as
unset), then the publisher options. Resolution follows: the effective probe as `resolve probe policy: ...` (the chart's
rules and `routing.observer.minPeriod`; `spec.routing.probe` replaces the chart's probe
as a whole, and `disabled: true` turns it off), then, as `resolve capacity policy:
...`, the effective poll goes through the chart's rules (`core.pollrules`), which in
practice leaves the format registry, the format's options, and the chart's observer
limits; for the service's own block, `spec.` is put in front of the message, as OME does.

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
from ome_routing.core.fields import (
    CapacityRuleError,
    RuleStage,
    go_q,
    invalid,
    read_bool,
    read_mapping,
    read_string_map,
    reject_unknown_fields,
    show,
    unresolved,
)
from ome_routing.core.pollrules import (
    CAPACITY_FIELDS,
    SERVICE_CAPACITY_FIELD,
    CapacityPolicy,
    PollFields,
    bounds_problem,
    poll_problem,
    read_poll,
    service_poll_problem,
)
from ome_routing.core.proberules import (
    PROBE_FIELDS,
    SERVICE_PROBE_FIELD,
    ProbeFields,
    ProbePolicy,
    probe_bounds_problem,
    probe_problem,
    read_probe,
    service_probe_problem,
)
from ome_routing.core.quantity import Quantity, QuantityError, parse_quantity

VALIDATE_PREFIX = "validate routing policy: "
RESOLVE_PREFIX = "resolve capacity policy: "
RESOLVE_PROBE_PREFIX = "resolve probe policy: "

ROUTING_FIELD = "spec.routing"
CAPACITY_FIELD = SERVICE_CAPACITY_FIELD
FACTORS_FIELD = "spec.routing.capacityFactors"
OPTIONS_FIELD = "spec.routing.publisher.options"
ROUTING_FIELDS: tuple[str, ...] = ("enabled", "capacityFactors", "capacity", "probe", "publisher")
#: OME's bounds on a service's publisher options (the CRD's and the controller's).
MAX_PUBLISHER_OPTIONS = 32
MAX_PUBLISHER_OPTION_KEY_BYTES = 128
MAX_PUBLISHER_OPTION_VALUE_BYTES = 4096

_PREFIXES = {
    RuleStage.VALIDATE: VALIDATE_PREFIX,
    RuleStage.RESOLVE: RESOLVE_PREFIX,
    RuleStage.RESOLVE_PROBE: RESOLVE_PROBE_PREFIX,
}


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
    #: The health probe to run: the service's own, else the chart's; None when neither
    #: sets one or `spec.routing.probe.disabled` is true.
    probe_policy: ProbePolicy | None = None

    @property
    def polls(self) -> bool:
        return self.capacity is not None


def _service_capacity(value: object) -> tuple[PollFields, bool]:
    """The service's own poll block and its `disabled` flag, judged by OME's per-service rules."""
    block = read_mapping(value, CAPACITY_FIELD)
    reject_unknown_fields(block, CAPACITY_FIELD, ("disabled", *CAPACITY_FIELDS))
    disabled_value = block.get("disabled")
    disabled = (
        False if disabled_value is None else read_bool(disabled_value, f"{CAPACITY_FIELD}.disabled")
    )
    poll = read_poll(block, CAPACITY_FIELD)
    problem = service_poll_problem(poll, disabled)
    if problem is not None:
        raise invalid(problem)
    return poll, disabled


def _service_probe(value: object) -> tuple[ProbeFields, bool]:
    """The service's own probe block and its `disabled` flag, judged by OME's per-service rules."""
    block = read_mapping(value, SERVICE_PROBE_FIELD)
    reject_unknown_fields(block, SERVICE_PROBE_FIELD, ("disabled", *PROBE_FIELDS))
    disabled_value = block.get("disabled")
    disabled = (
        False
        if disabled_value is None
        else read_bool(disabled_value, f"{SERVICE_PROBE_FIELD}.disabled")
    )
    probe = read_probe(block, SERVICE_PROBE_FIELD)
    problem = service_probe_problem(probe, disabled)
    if problem is not None:
        raise invalid(problem)
    return probe, disabled


def _effective_probe(
    own: tuple[ProbeFields, bool] | None, config: OperatorConfig
) -> ProbePolicy | None:
    """The probe to run; the service's own block is judged against the chart's limits."""
    if own is None:
        return config.probe_policy
    probe, disabled = own
    if disabled:
        return None
    problem = probe_problem(probe) or probe_bounds_problem(probe, config.observer)
    if problem is not None:
        raise CapacityRuleError(RuleStage.RESOLVE_PROBE, "spec." + problem)
    return probe.policy()


def _factors(value: object) -> Mapping[str, Quantity]:
    if value is None:
        return MappingProxyType({})
    block = read_mapping(value, FACTORS_FIELD)
    factors: dict[str, Quantity] = {}
    for name, raw in block.items():
        if not isinstance(name, str) or not name:
            raise invalid(f"{FACTORS_FIELD} key {show(name)} must be a WorkloadCluster name")
        field_name = f"{FACTORS_FIELD}[{go_q(name)}]"
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise invalid(f'{field_name} must be a quantity such as "1.5", got {show(raw)}')
        text = raw if isinstance(raw, str) else str(raw)
        try:
            factors[name] = parse_quantity(text)
        except QuantityError as err:
            raise invalid(f"{field_name}: {err}") from None
    for name, quantity in sorted(factors.items()):
        if quantity.value <= 0:
            raise invalid(
                f"{FACTORS_FIELD}[{go_q(name)}] must be positive, got {go_q(str(quantity))}"
            )
    return MappingProxyType(dict(sorted(factors.items())))


def _check_publisher_options(publisher: Mapping[str, Any] | None) -> None:
    """OME's limits on a service's publisher options; keys are visited in sorted order."""
    if publisher is None:
        return
    options = read_string_map(publisher.get("options"), OPTIONS_FIELD)
    if len(options) > MAX_PUBLISHER_OPTIONS:
        raise invalid(
            f"{OPTIONS_FIELD} must contain at most {MAX_PUBLISHER_OPTIONS} entries, "
            f"got {len(options)}"
        )
    for key, value in options:
        if not key.strip():
            raise invalid(f"{OPTIONS_FIELD} contains an empty or whitespace-only key")
        if len(key.encode()) > MAX_PUBLISHER_OPTION_KEY_BYTES:
            raise invalid(
                f"{OPTIONS_FIELD} key {go_q(key)} exceeds the "
                f"{MAX_PUBLISHER_OPTION_KEY_BYTES}-byte limit"
            )
        if not value.strip():
            raise invalid(f"{OPTIONS_FIELD}[{go_q(key)}] must not be empty or whitespace-only")
        if len(value.encode()) > MAX_PUBLISHER_OPTION_VALUE_BYTES:
            raise invalid(
                f"{OPTIONS_FIELD}[{go_q(key)}] exceeds the "
                f"{MAX_PUBLISHER_OPTION_VALUE_BYTES}-byte value limit"
            )


def _raw(value: object, field_name: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return MappingProxyType(dict(read_mapping(value, field_name)))


def _resolve(
    routing: Mapping[str, Any] | None,
    config: OperatorConfig,
) -> RoutingPolicy:
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

    # Validation, in OME's order: factors, probe, capacity, publisher options.
    factors = _factors(routing.get("capacityFactors"))
    probe = _raw(routing.get("probe"), SERVICE_PROBE_FIELD)
    own_probe = None if probe is None else _service_probe(probe)
    capacity_value = routing.get("capacity")
    own = None if capacity_value is None else _service_capacity(capacity_value)
    publisher = _raw(routing.get("publisher"), f"{ROUTING_FIELD}.publisher")
    _check_publisher_options(publisher)

    # Resolution: the effective probe, then the effective poll, against this build and
    # the chart.
    probe_policy = _effective_probe(own_probe, config)
    capacity: CapacityPolicy | None
    if own is None:
        capacity = config.capacity
        mode = PollMode.NOT_CONFIGURED if capacity is None else PollMode.CHART
    elif own[1]:
        capacity, mode = None, PollMode.DISABLED
    else:
        poll = own[0]
        problem = poll_problem(poll) or bounds_problem(poll, config.observer)
        if problem is not None:
            raise unresolved("spec." + problem)
        capacity, mode = poll.policy(), PollMode.SERVICE
    return RoutingPolicy(
        enabled=True,
        capacity=capacity,
        poll_mode=mode,
        capacity_factors=factors,
        probe=probe,
        publisher=publisher,
        probe_policy=probe_policy,
    )


def resolve_routing_policy(
    routing: Mapping[str, Any] | None,
    config: OperatorConfig,
    placement: Mapping[str, Any] | None = None,
) -> RoutingPolicy:
    """Resolve an InferenceService's `spec.routing` (None when it has none) under `config`.

    `placement` (the service's `spec.placement`) is accepted and ignored: OME no longer
    reads deprecated capacity factors from it.
    Raises `PolicyError`, whose text is the line the controller logs.
    """
    try:
        return _resolve(routing, config)
    except CapacityRuleError as err:
        raise PolicyError(err.stage, err.detail) from None
