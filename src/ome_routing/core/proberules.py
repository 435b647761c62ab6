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

The rules a probe shares with a capacity poll (request, timing, `disabled`,
`minPeriod`) are `core.blockrules`'s.

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

from ome_routing.core.blockrules import (
    chart_timing_problem,
    disabled_problem,
    method_problem,
    min_period_problem,
    not_positive,
    path_problem,
    service_request_problem,
    service_timing_problem,
    when_path_set,
)
from ome_routing.core.digests import DIGEST_VERSION, go_json_string
from ome_routing.core.durations import Duration
from ome_routing.core.fields import (
    ZERO,
    block_count,
    block_durations,
    block_text,
    go_q,
    invalid,
    read_whole_number,
    show,
)
from ome_routing.core.pollrules import ObserverLimits

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
#: The probe's duration fields: values key -> ProbeFields attribute.
PROBE_DURATIONS: dict[str, str] = {"period": "period", "timeout": "timeout"}


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
    durations = block_durations(block, field, PROBE_DURATIONS, strict=strict_durations)
    return ProbeFields(
        path=block_text(block, field, "path"),
        method=block_text(block, field, "method"),
        accept_statuses=_statuses(block.get("acceptStatuses"), f"{field}.acceptStatuses"),
        gate_statuses=_statuses(block.get("gateStatuses"), f"{field}.gateStatuses"),
        failure_threshold=block_count(block, field, "failureThreshold"),
        success_threshold=block_count(block, field, "successThreshold"),
        all_failed_policy=block_text(block, field, "allFailedPolicy"),
        **durations,
    )


def _valid_status(status: int) -> bool:
    return MIN_STATUS <= status <= MAX_STATUS


def _status_problem(
    field: str, probe: ProbeFields, *, bounds: str, overlap_per_gate: bool
) -> str | None:
    """The status lists' rules, statuses in the order written: each in range (`bounds`
    ends the message), no forbidden gate status; with `overlap_per_gate`, no gate status
    that is also accepted (the per-service order: checked with each gate status)."""
    for status in probe.accept_statuses:
        if not _valid_status(status):
            return f"{field}.acceptStatuses contains invalid HTTP status {status}{bounds}"
    for status in probe.gate_statuses:
        if not _valid_status(status):
            return f"{field}.gateStatuses contains invalid HTTP status {status}{bounds}"
        if status in FORBIDDEN_GATE_STATUSES:
            return f"{field}.gateStatuses must not contain {status}"
        if overlap_per_gate and status in probe.accept_statuses:
            return f"{field} status {status} is in both acceptStatuses and gateStatuses"
    return None


def probe_problem(probe: ProbeFields) -> str | None:
    """The first rule an enabled probe breaks, in the chart's order; None when it has none."""
    f = CHART_PROBE_FIELD
    when = when_path_set(f)
    problem = path_problem(f, probe.path)
    if problem:
        return problem
    if not probe.method:
        return f"{f}.method is required {when}"
    problem = method_problem(f, probe.method)
    if problem:
        return problem
    if not probe.accept_statuses:
        return f"{f}.acceptStatuses is required {when}"
    if not probe.gate_statuses:
        return f"{f}.gateStatuses is required {when}"
    problem = _status_problem(f, probe, bounds="", overlap_per_gate=False)
    if problem:
        return problem
    for status in probe.accept_statuses:
        if status in probe.gate_statuses:
            return f"{f}: status {status} is in both acceptStatuses and gateStatuses"
    problem = chart_timing_problem(f, probe.period, probe.timeout) or not_positive(
        f,
        (
            ("failureThreshold", probe.failure_threshold),
            ("successThreshold", probe.success_threshold),
        ),
        when,
    )
    if problem:
        return problem
    if probe.all_failed_policy not in ALL_FAILED_POLICIES:
        return (
            f"{f}.allFailedPolicy {go_q(probe.all_failed_policy)} must be "
            f"{go_q(PRESERVE_TRAFFIC)} or {go_q(DRAIN)} {when}"
        )
    return None


def probe_bounds_problem(probe: ProbeFields, limits: ObserverLimits) -> str | None:
    """The observer limit an enabled probe breaks; messages name `routing.probe`."""
    return min_period_problem(CHART_PROBE_FIELD, probe.period, limits.min_period)


def service_probe_problem(probe: ProbeFields, disabled: bool) -> str | None:
    """The first rule a service's `spec.routing.probe` breaks, in OME's per-service order."""
    f = SERVICE_PROBE_FIELD
    if disabled:
        return disabled_problem(f, probe.operational, "probe")
    problem = service_request_problem(f, probe.path, probe.method)
    if problem:
        return problem
    if not probe.accept_statuses:
        return f"{f}.acceptStatuses is required"
    if not probe.gate_statuses:
        return f"{f}.gateStatuses is required"
    bounds = "; statuses must be between 100 and 599"
    problem = _status_problem(f, probe, bounds=bounds, overlap_per_gate=True) or (
        service_timing_problem(f, probe.period, probe.timeout)
    )
    if problem:
        return problem
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
