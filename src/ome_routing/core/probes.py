"""A home's health probe state: verdicts, OME's hysteresis, and the entry's `probe` block.

Each attempt ends in one of three verdicts (`classify`): the status is in
`acceptStatuses` (checked first) and passes, in `gateStatuses` and fails, or anything
else is inconclusive (`HTTP 302 (not in accept or gate list)`); a transport error or a
timeout fails (`transport error: ...`), a request that could not be built is
inconclusive (`probe could not run: ...`).

The counters are OME's (`record_attempt`):

- a failure resets the passes and counts one more failure in a row; at
  `failureThreshold` the home is gated;
- a pass resets the failures; while gated it counts one more pass in a row, and at
  `successThreshold` the gate lifts (passes count only while gated);
- an inconclusive attempt changes neither counter nor the gate.

`reachable` is None until an attempt was conclusive, else whether the home is open: a
home whose every result so far is `Unknown` is never gated. State survives a restart
through the map's `entries[].probe` (`restore`), matched by the caller on owner,
cluster, endpoint and `policyDigest`.

Pure: time is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from ome_routing.core.gotime import parse as parse_time
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.report import format_rfc3339

#: Both counters stop here, as OME's int32 counters do.
MAX_COUNT = 2**31 - 1

TRANSPORT_ERROR = "transport error: "
BODY_ERROR = "response body error: "
NOT_RUN = "probe could not run: "


class ProbeResult(StrEnum):
    """The last attempt's outcome, as `entries[].probe.result` shows it."""

    PASSING = "Passing"
    FAILING = "Failing"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One finished attempt: its verdict and the message the entry shows."""

    result: ProbeResult
    message: str


def classify(status: int, policy: ProbePolicy) -> Attempt:
    """An answer's verdict: the accept list first, then the gate list, else inconclusive."""
    if status in policy.accept_statuses:
        return Attempt(ProbeResult.PASSING, f"HTTP {status}")
    if status in policy.gate_statuses:
        return Attempt(ProbeResult.FAILING, f"HTTP {status}")
    return Attempt(ProbeResult.UNKNOWN, f"HTTP {status} (not in accept or gate list)")


def transport_error(detail: str) -> Attempt:
    """No answer (refused, unresolved, TLS, timed out): a failure."""
    return Attempt(ProbeResult.FAILING, TRANSPORT_ERROR + detail)


def body_error(detail: str) -> Attempt:
    """The answer's body could not be read: a failure."""
    return Attempt(ProbeResult.FAILING, BODY_ERROR + detail)


def not_run(detail: str) -> Attempt:
    """The request could not be built: inconclusive."""
    return Attempt(ProbeResult.UNKNOWN, NOT_RUN + detail)


@dataclass(frozen=True, slots=True)
class ProbeState:
    """One home's probe state; `ProbeState()` is a home not yet probed."""

    observed: bool = False
    result: ProbeResult = ProbeResult.UNKNOWN
    message: str = ""
    last_probe_time: datetime | None = None
    failures: int = 0
    passes: int = 0
    gated: bool = False
    #: some attempt (or the restored state) was conclusive
    conclusive: bool = False


NOT_PROBED = ProbeState()


def record_attempt(
    state: ProbeState, attempt: Attempt, now: datetime, policy: ProbePolicy
) -> ProbeState:
    """The state after an attempt that finished at `now` (stored as `lastProbeTime`)."""
    seen = replace(state, observed=True, message=attempt.message, last_probe_time=now)
    if attempt.result is ProbeResult.UNKNOWN:
        return replace(seen, result=ProbeResult.UNKNOWN)
    if attempt.result is ProbeResult.FAILING:
        failures = min(state.failures + 1, MAX_COUNT)
        return replace(
            seen,
            result=ProbeResult.FAILING,
            failures=failures,
            passes=0,
            conclusive=True,
            gated=state.gated or failures >= policy.failure_threshold,
        )
    passed = replace(seen, result=ProbeResult.PASSING, failures=0, conclusive=True)
    if not state.gated:
        return replace(passed, passes=0)
    passes = min(state.passes + 1, MAX_COUNT)
    if passes >= policy.success_threshold:
        return replace(passed, gated=False, passes=0)
    return replace(passed, passes=passes)


def reachable(state: ProbeState | None) -> bool | None:
    """None until an attempt was conclusive; then whether the home is open (not gated)."""
    if state is None or not state.conclusive:
        return None
    return not state.gated


# --- the entry's `probe` block -------------------------------------------------------


def probe_to_json(state: ProbeState, digest: str) -> dict[str, Any]:
    """`entries[].probe` as OME writes it: `gated` only while true, failures while non-zero."""
    block: dict[str, Any] = {"policyDigest": digest, "result": str(state.result)}
    if state.gated:
        block["gated"] = True
    if state.last_probe_time is not None:
        block["lastProbeTime"] = format_rfc3339(state.last_probe_time.replace(microsecond=0))
    if state.failures:
        block["consecutiveFailures"] = state.failures
    if state.message:
        block["message"] = state.message
    return block


@dataclass(frozen=True, slots=True)
class Restored:
    """A state read back from a map, and when its next probe is due."""

    state: ProbeState
    #: None: probe at once
    next_probe: datetime | None


def restore(block: Mapping[str, Any], now: datetime, policy: ProbePolicy) -> Restored:
    """OME's restart hydration of a stored `entries[].probe` (the caller matched its digest).

    The gate, the failures (a negative count reads as 0), the result (empty reads as
    `Unknown`) and the message come back; passes start at 0. The next probe is due one
    period after `lastProbeTime`, or at once if that is missing or in the future.
    """
    raw_failures = block.get("consecutiveFailures")
    failures = raw_failures if isinstance(raw_failures, int) and raw_failures > 0 else 0
    failures = min(failures, MAX_COUNT)
    gated = block.get("gated") is True
    try:
        result = ProbeResult(block.get("result") or ProbeResult.UNKNOWN)
    except ValueError:
        result = ProbeResult.UNKNOWN
    message = block.get("message")
    last: datetime | None = None
    stamp = block.get("lastProbeTime")
    if isinstance(stamp, str):
        try:
            last, zero = parse_time(stamp)
            last = None if zero else last
        except ValueError:
            last = None
    state = ProbeState(
        observed=True,
        result=result,
        message=message if isinstance(message, str) else "",
        last_probe_time=last,
        failures=failures,
        passes=0,
        gated=gated,
        conclusive=gated or failures > 0 or result in (ProbeResult.PASSING, ProbeResult.FAILING),
    )
    if last is None or last > now:
        return Restored(state, None)
    return Restored(state, last + policy.period.as_timedelta())
