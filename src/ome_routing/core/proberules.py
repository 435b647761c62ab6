"""The rules of a health probe block, written once for the chart and for a service.

A probe block is read into `ProbeFields`, where, as in OME, a zero value (an empty
string, 0, `0s`, an empty list) counts as unset and `path` is the switch: a block
without a path is off. Pure checks then judge it, each returning the first broken rule
(OME reports one at a time) or None:

- `probe_problem`: OME's rules for an enabled probe in the chart's order (path, method,
  the status lists, the overlap of the two lists, durations, thresholds, the
  all-failed policy). Its messages name `routing.probe`; for a service's own block the
  caller puts `spec.` in front of the whole message, as OME does.
- `probe_bounds_problem`: the chart's `routing.observer.minPeriod`.
- `service_probe_problem`: OME's per-service rules for `spec.routing.probe`, in OME's
  per-service order (the overlap is checked per gate status; its own wording).

`probe_digest` is OME's `policyDigest` of an effective probe: `sha256:` and the
lower-case hex SHA-256 of compact Go JSON, keys in this order:
`{"version":1,"path","method","acceptStatuses","gateStatuses","periodNanoseconds",
"timeoutNanoseconds","failureThreshold","successThreshold","allFailedPolicy"}`, the
status lists sorted and de-duplicated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ome_routing.core.digests import DIGEST_VERSION, go_json_string
from ome_routing.core.durations import Duration
from ome_routing.core.fields import (
    ZERO,
    DurationSyntaxError,
    go_q,
    invalid,
    read_duration,
    read_string,
    read_whole_number,
    show,
)
from ome_routing.core.pollrules import (
    METHODS,
    OBSERVER_FIELD,
    ObserverLimits,
    service_request_problem,
)

CHART_PROBE_FIELD = "routing.probe"
SERVICE_PROBE_FIELD = "spec.routing.probe"
PRESERVE_TRAFFIC = "PreserveTraffic"
DRAIN = "Drain"
ALL_FAILED_POLICIES: tuple[str, ...] = (PRESERVE_TRAFFIC, DRAIN)
#: Statuses a gate list must not hold: they say the probe was refused, not that the
#: home is down.
FORBIDDEN_GATE_STATUSES: tuple[int, ...] = (401, 403, 429)
MIN_STATUS, MAX_STATUS = 100, 599

#: Every field of a probe block, in the order OME's type lists them.
PROBE_FIELDS: tuple[str, ...] = (
    "path",
    "method",
    "acceptStatuses",
    "gateStatuses",
    "period",
    "timeout",
    "failureThreshold",
    "successThreshold",
    "allFailedPolicy",
)


@dataclass(frozen=True, slots=True)
class ProbePolicy:
    """A complete, validated health probe: what to ask each home, how often, how to judge."""

    path: str
    method: str
    #: statuses that pass, as written (the digest sorts and de-duplicates them)
    accept_statuses: tuple[int, ...]
    #: statuses that fail; any other status is inconclusive
    gate_statuses: tuple[int, ...]
    period: Duration
    timeout: Duration
    #: failures in a row that gate a home
    failure_threshold: int
    #: passes in a row, while gated, that reopen it
    success_threshold: int
    #: `PreserveTraffic` or `Drain`: what happens when every home is gated
    all_failed_policy: str


@dataclass(frozen=True, slots=True)
class ProbeFields:
    """A probe block as written. A zero value counts as unset, as in OME; `path` is the switch."""

    path: str = ""
    method: str = ""
    accept_statuses: tuple[int, ...] = ()
    gate_statuses: tuple[int, ...] = ()
    period: Duration = ZERO
    timeout: Duration = ZERO
    failure_threshold: int = 0
    success_threshold: int = 0
    all_failed_policy: str = ""

    @property
    def enabled(self) -> bool:
        return self.path != ""

    @property
    def operational(self) -> bool:
        """Any field set, which `disabled: true` must not be combined with."""
        return self != ProbeFields()

    def policy(self) -> ProbePolicy:
        """The probe to run; only for fields that passed the rules."""
        return ProbePolicy(
            path=self.path,
            method=self.method,
            accept_statuses=self.accept_statuses,
            gate_statuses=self.gate_statuses,
            period=self.period,
            timeout=self.timeout,
            failure_threshold=self.failure_threshold,
            success_threshold=self.success_threshold,
            all_failed_policy=self.all_failed_policy,
        )


def _statuses(value: object, field: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise invalid(f"{field} must be a list of HTTP statuses, got {show(value)}")
    return tuple(read_whole_number(item, f"{field}[{index}]") for index, item in enumerate(value))


def read_probe(
    block: Mapping[str, Any], field: str, *, strict_durations: bool = True
) -> ProbeFields:
    """Read a probe block's fields by type; a null or missing field is unset.

    With `strict_durations` off, a duration that does not parse reads as unset: the
    chart reports those together, before any rule (see `core.config`).
    """

    def text(name: str) -> str:
        value = block.get(name)
        return "" if value is None else read_string(value, f"{field}.{name}")

    def count(name: str) -> int:
        value = block.get(name)
        return 0 if value is None else read_whole_number(value, f"{field}.{name}")

    durations: dict[str, Duration] = {}
    for key in ("period", "timeout"):
        try:
            durations[key] = read_duration(block.get(key), f"{field}.{key}")
        except DurationSyntaxError:
            if strict_durations:
                raise
            durations[key] = ZERO
    return ProbeFields(
        path=text("path"),
        method=text("method"),
        accept_statuses=_statuses(block.get("acceptStatuses"), f"{field}.acceptStatuses"),
        gate_statuses=_statuses(block.get("gateStatuses"), f"{field}.gateStatuses"),
        failure_threshold=count("failureThreshold"),
        success_threshold=count("successThreshold"),
        all_failed_policy=text("allFailedPolicy"),
        **durations,
    )


def _valid_status(status: int) -> bool:
    return MIN_STATUS <= status <= MAX_STATUS


def probe_problem(probe: ProbeFields) -> str | None:
    """The first rule an enabled probe breaks, in the chart's order; None when it has none."""
    f = CHART_PROBE_FIELD
    when = f"when {f}.path is set"
    if not probe.path.startswith("/"):
        return f"{f}.path {go_q(probe.path)} must begin with {go_q('/')}"
    if not probe.method:
        return f"{f}.method is required {when}"
    if probe.method not in METHODS:
        return f"{f}.method {go_q(probe.method)} must be GET, HEAD, or POST"
    if not probe.accept_statuses:
        return f"{f}.acceptStatuses is required {when}"
    if not probe.gate_statuses:
        return f"{f}.gateStatuses is required {when}"
    for status in probe.accept_statuses:
        if not _valid_status(status):
            return f"{f}.acceptStatuses contains invalid HTTP status {status}"
    for status in probe.gate_statuses:
        if not _valid_status(status):
            return f"{f}.gateStatuses contains invalid HTTP status {status}"
        if status in FORBIDDEN_GATE_STATUSES:
            return f"{f}.gateStatuses must not contain {status}"
    for status in probe.accept_statuses:
        if status in probe.gate_statuses:
            return f"{f}: status {status} is in both acceptStatuses and gateStatuses"
    for name, value in (("period", probe.period), ("timeout", probe.timeout)):
        if value.nanoseconds <= 0:
            return f"{f}.{name} must be positive {when}"
    if probe.timeout >= probe.period:
        return f"{f}.timeout ({probe.timeout}) must be shorter than {f}.period ({probe.period})"
    for name, number in (
        ("failureThreshold", probe.failure_threshold),
        ("successThreshold", probe.success_threshold),
    ):
        if number <= 0:
            return f"{f}.{name} must be positive {when}"
    if probe.all_failed_policy not in ALL_FAILED_POLICIES:
        return (
            f"{f}.allFailedPolicy {go_q(probe.all_failed_policy)} must be "
            f"{go_q(PRESERVE_TRAFFIC)} or {go_q(DRAIN)} {when}"
        )
    return None


def probe_bounds_problem(probe: ProbeFields, limits: ObserverLimits) -> str | None:
    """The observer limit an enabled probe breaks; messages name `routing.probe`."""
    if probe.period < limits.min_period:
        return (
            f"{CHART_PROBE_FIELD}.period ({probe.period}) must be at least "
            f"{OBSERVER_FIELD}.minPeriod ({limits.min_period})"
        )
    return None


def service_probe_problem(probe: ProbeFields, disabled: bool) -> str | None:
    """The first rule a service's `spec.routing.probe` breaks, in OME's per-service order."""
    f = SERVICE_PROBE_FIELD
    if disabled:
        if probe.operational:
            return f"{f}.disabled must not be combined with probe configuration fields"
        return None
    request = service_request_problem(f, probe.path, probe.method)
    if request:
        return request
    if not probe.accept_statuses:
        return f"{f}.acceptStatuses is required"
    if not probe.gate_statuses:
        return f"{f}.gateStatuses is required"
    bounds = "statuses must be between 100 and 599"
    for status in probe.accept_statuses:
        if not _valid_status(status):
            return f"{f}.acceptStatuses contains invalid HTTP status {status}; {bounds}"
    for status in probe.gate_statuses:
        if not _valid_status(status):
            return f"{f}.gateStatuses contains invalid HTTP status {status}; {bounds}"
        if status in FORBIDDEN_GATE_STATUSES:
            return f"{f}.gateStatuses must not contain {status}"
        if status in probe.accept_statuses:
            return f"{f} status {status} is in both acceptStatuses and gateStatuses"
    if probe.period.nanoseconds <= 0:
        return f"{f}.period must be positive"
    if probe.timeout.nanoseconds <= 0:
        return f"{f}.timeout must be positive"
    if probe.timeout >= probe.period:
        return f"{f}.timeout ({probe.timeout}) must be shorter than period ({probe.period})"
    if probe.failure_threshold <= 0:
        return f"{f}.failureThreshold must be positive"
    if probe.success_threshold <= 0:
        return f"{f}.successThreshold must be positive"
    if probe.all_failed_policy not in ALL_FAILED_POLICIES:
        return (
            f"{f}.allFailedPolicy {go_q(probe.all_failed_policy)} must be "
            f"{go_q(PRESERVE_TRAFFIC)} or {go_q(DRAIN)}"
        )
    return None


# --- the digest --------------------------------------------------------------------


def _go_ints(values: tuple[int, ...]) -> str:
    return "[" + ",".join(str(v) for v in sorted(set(values))) + "]"


def probe_digest_payload(policy: ProbePolicy) -> bytes:
    """The exact bytes that are hashed: compact Go JSON, keys in the recipe's order."""
    text = (
        f'{{"version":{DIGEST_VERSION}'
        f',"path":{go_json_string(policy.path)}'
        f',"method":{go_json_string(policy.method)}'
        f',"acceptStatuses":{_go_ints(policy.accept_statuses)}'
        f',"gateStatuses":{_go_ints(policy.gate_statuses)}'
        f',"periodNanoseconds":{policy.period.nanoseconds}'
        f',"timeoutNanoseconds":{policy.timeout.nanoseconds}'
        f',"failureThreshold":{policy.failure_threshold}'
        f',"successThreshold":{policy.success_threshold}'
        f',"allFailedPolicy":{go_json_string(policy.all_failed_policy)}}}'
    )
    return text.encode("utf-8")


def probe_digest(policy: ProbePolicy) -> str:
    """`sha256:` and the hex SHA-256 of the probe's payload, as OME's `probe.policyDigest`."""
    return "sha256:" + hashlib.sha256(probe_digest_payload(policy)).hexdigest()
