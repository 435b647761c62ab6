"""A short code for each family of a home's `capacity.fallbackReason`.

The TrafficMap carries the full reason text; the table shows one code per family of the
spec's fallback table, so that a glance tells "wait" (NoReport, AwaitingQuorum) from
"fix the reporter" (StaleReport, FutureReport, InvalidReport) from "fix the path to it"
(Unreachable, HTTPStatus, ReadFailed, Incomplete, InvalidRequest). The prefixes come from
the modules that write the reasons, so a reworded reason cannot drift from its code.
"""

from __future__ import annotations

from enum import StrEnum

from ome_routing.core import capacity, report
from ome_routing.core.durations import Duration
from ome_routing.observer import failures


class FallbackCode(StrEnum):
    NOT_RECORDED = "NotRecorded"
    NO_REPORT = "NoReport"
    AWAITING_QUORUM = "AwaitingQuorum"
    STALE_REPORT = "StaleReport"
    EXPIRED_SAMPLES = "ExpiredSamples"
    FUTURE_REPORT = "FutureReport"
    UNREACHABLE = "Unreachable"
    HTTP_STATUS = "HTTPStatus"
    INVALID_REPORT = "InvalidReport"
    READ_FAILED = "ReadFailed"
    INCOMPLETE = "Incomplete"
    INVALID_REQUEST = "InvalidRequest"
    NOT_SUBMITTED = "NotSubmitted"
    OTHER = "OtherReportedReason"


#: What each code means, for `--help`; in the order of the spec's fallback table.
MEANINGS: dict[FallbackCode, str] = {
    FallbackCode.NOT_RECORDED: "the home has a ceiling, or no poll applies",
    FallbackCode.NO_REPORT: "no capacity report yet",
    FallbackCode.AWAITING_QUORUM: "capacity report awaiting quorum",
    FallbackCode.STALE_REPORT: "capacity report is stale",
    FallbackCode.EXPIRED_SAMPLES: "awaiting quorum after stale samples expired",
    FallbackCode.FUTURE_REPORT: "capacity report timestamp is in the future",
    FallbackCode.UNREACHABLE: "capacity endpoint unreachable",
    FallbackCode.HTTP_STATUS: "capacity endpoint returned an HTTP error status",
    FallbackCode.INVALID_REPORT: "the body is not a valid report",
    FallbackCode.READ_FAILED: "reading capacity response failed (such as too large)",
    FallbackCode.INCOMPLETE: "capacity request did not complete",
    FallbackCode.INVALID_REQUEST: "no request could be built from endpoint and path",
    FallbackCode.NOT_SUBMITTED: "capacity observation could not be submitted",
    FallbackCode.OTHER: "a reason this version does not know",
}

# Longest prefixes first: "awaiting quorum after stale samples expired" before "awaiting quorum".
_PREFIXES: tuple[tuple[str, FallbackCode], ...] = (
    (capacity.expired_reason(0, 1).split(" (")[0], FallbackCode.EXPIRED_SAMPLES),
    (capacity.awaiting_quorum_reason(0, 1).split("(")[0], FallbackCode.AWAITING_QUORUM),
    (report.stale_reason(Duration(0)).split(" (")[0], FallbackCode.STALE_REPORT),
    (report.INVALID_PREFIX, FallbackCode.INVALID_REPORT),
    (report.negative_reason(-1).split("(")[0], FallbackCode.INVALID_REPORT),
    (failures.UNREACHABLE, FallbackCode.UNREACHABLE),
    (failures.HTTP_STATUS, FallbackCode.HTTP_STATUS),
    (failures.READING, FallbackCode.READ_FAILED),
    (failures.INCOMPLETE, FallbackCode.INCOMPLETE),
    (failures.INVALID_TARGET, FallbackCode.INVALID_REQUEST),
    (failures.INVALID_URL, FallbackCode.INVALID_REQUEST),
    (failures.UNBUILDABLE, FallbackCode.INVALID_REQUEST),
    (failures.NOT_SUBMITTED, FallbackCode.NOT_SUBMITTED),
)
_EXACT: dict[str, FallbackCode] = {
    capacity.NO_REPORT_YET: FallbackCode.NO_REPORT,
    report.FUTURE: FallbackCode.FUTURE_REPORT,
    report.NO_SERVABLE: FallbackCode.INVALID_REPORT,
    report.NO_OBSERVED_AT: FallbackCode.INVALID_REPORT,
}


def fallback_code(reason: object) -> FallbackCode:
    """The code of a `capacity.fallbackReason`; `NotRecorded` when the entry has none."""
    if reason is None or reason == "":
        return FallbackCode.NOT_RECORDED
    if not isinstance(reason, str):
        return FallbackCode.OTHER
    if reason in _EXACT:
        return _EXACT[reason]
    for prefix, code in _PREFIXES:
        if reason.startswith(prefix):
            return code
    return FallbackCode.OTHER


def codes_help() -> str:
    """The codes and their meanings, one per line, for `--help`."""
    return "\n".join(f"{code.value}: {meaning}" for code, meaning in MEANINGS.items())
