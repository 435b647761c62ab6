"""A short code for each family of a home's `capacity.fallbackReason`, as OME's CLI prints.

The TrafficMap carries the full reason text, which can hold an endpoint's URL or a
reporter's error; the plugin shows only a code picked by the reason's fixed prefix, in
every output, so that nothing a reporter wrote reaches a terminal or a log scrape. The
codes and prefixes are OME's (`kubectl ome placement endpoint`, v1.3): a reason that is
too long, not UTF-8 or holds control characters is `MalformedPayload` and is also
counted as an issue of the report. A reason OME does not list is `OtherReportedReason`.

The prefixes are literal, as OME's are, rather than derived from the modules that write
the reasons: the plugin reads maps that any version of the controller wrote. The unit
tests check that this project's reason writers produce texts that classify as expected.
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum


class FallbackCode(StrEnum):
    NOT_RECORDED = "NotRecorded"
    NO_REPORT = "NoReport"
    INVALID_TARGET = "InvalidTarget"
    CLOCK_UNAVAILABLE = "ClockUnavailable"
    OBSERVER_UNAVAILABLE = "ObserverUnavailable"
    UNREACHABLE = "Unreachable"
    HTTP_ERROR = "HTTPError"
    RESPONSE_READ_ERROR = "ResponseReadError"
    REQUEST_INCOMPLETE = "RequestIncomplete"
    INVALID_REPORT = "InvalidReport"
    STALE_REPORT = "StaleReport"
    AWAITING_QUORUM = "AwaitingQuorum"
    OTHER = "OtherReportedReason"
    MALFORMED_PAYLOAD = "MalformedPayload"


#: The longest reason, in UTF-8 bytes, that is classified rather than called malformed.
MAX_REASON_BYTES = 4096

#: What each code means, for `--help`; in the order of OME's classifier.
MEANINGS: dict[FallbackCode, str] = {
    FallbackCode.NOT_RECORDED: "no reason: the home has a ceiling, or no poll applies",
    FallbackCode.NO_REPORT: "no capacity report yet",
    FallbackCode.INVALID_TARGET: "the entry's endpoint is not a valid target",
    FallbackCode.CLOCK_UNAVAILABLE: "the controller has no clock for the window",
    FallbackCode.OBSERVER_UNAVAILABLE: "the poll could not be handed to the observer",
    FallbackCode.UNREACHABLE: "DNS, connection or TLS error, or no answer within timeout",
    FallbackCode.HTTP_ERROR: "the endpoint answered with a status other than 200",
    FallbackCode.RESPONSE_READ_ERROR: "the body could not be read, or is too long",
    FallbackCode.REQUEST_INCOMPLETE: "the poll ran out of time while reading",
    FallbackCode.INVALID_REPORT: "a negative count, or a timestamp in the future",
    FallbackCode.STALE_REPORT: "the report is older than maxAge",
    FallbackCode.AWAITING_QUORUM: "fewer than quorum readings so far, or left after expiry",
    FallbackCode.OTHER: "any other reason, such as a body that is not a valid report",
    FallbackCode.MALFORMED_PAYLOAD: "a reason too long, not UTF-8, or with control characters",
}

# Checked in order; OME's exact texts and prefixes, each with its code.
_EXACT: dict[str, FallbackCode] = {
    "no capacity report yet": FallbackCode.NO_REPORT,
    "capacity clock is not configured": FallbackCode.CLOCK_UNAVAILABLE,
    "capacity observer executor is not configured": FallbackCode.OBSERVER_UNAVAILABLE,
    "capacity report timestamp is in the future": FallbackCode.INVALID_REPORT,
}
_PREFIXES: tuple[tuple[str, FallbackCode], ...] = (
    ("capacity target is invalid:", FallbackCode.INVALID_TARGET),
    ("capacity observation could not be submitted:", FallbackCode.OBSERVER_UNAVAILABLE),
    ("capacity endpoint unreachable:", FallbackCode.UNREACHABLE),
    ("capacity endpoint returned HTTP ", FallbackCode.HTTP_ERROR),
    ("reading capacity response:", FallbackCode.RESPONSE_READ_ERROR),
    ("capacity request did not complete:", FallbackCode.REQUEST_INCOMPLETE),
    ("capacity report is negative (", FallbackCode.INVALID_REPORT),
    ("capacity report is stale (", FallbackCode.STALE_REPORT),
    ("capacity report awaiting quorum (", FallbackCode.AWAITING_QUORUM),
    ("capacity report awaiting quorum after stale samples expired (", FallbackCode.AWAITING_QUORUM),
)


def is_malformed(reason: str | bytes) -> bool:
    """Over 4096 bytes, not valid UTF-8, or holding a control character (line breaks too)."""
    if isinstance(reason, str):
        try:
            raw = reason.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the JSON held invalid UTF-16
            return True
    else:
        raw = reason
    if len(raw) > MAX_REASON_BYTES:
        return True
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def fallback_code(reason: object) -> FallbackCode:
    """The code of a `capacity.fallbackReason`; `NotRecorded` when the entry has none."""
    if reason is None:
        return FallbackCode.NOT_RECORDED
    if not isinstance(reason, str | bytes) or is_malformed(reason):
        return FallbackCode.MALFORMED_PAYLOAD
    text = reason if isinstance(reason, str) else reason.decode("utf-8")
    if text == "":
        return FallbackCode.NOT_RECORDED
    if text in _EXACT:
        return _EXACT[text]
    for prefix, code in _PREFIXES:
        if text.startswith(prefix):
            return code
    return FallbackCode.OTHER


def codes_help() -> str:
    """The codes and their meanings, one per line, for `--help`."""
    return "\n".join(f"{code.value}: {meaning}" for code, meaning in MEANINGS.items())
