"""Why a poll failed, as the exact `fallbackReason` text the TrafficMap carries.

Each failure belongs to one family of the specification's fallback table, with a fixed
prefix, followed by a short human error (`connection refused`, `no such host`,
`timed out after 3s`), never a traceback or a repr. The report's own reasons (invalid,
negative, no servable count, ...) come from `core.report`; the stale and future ones
from the window.

This module turns socket, TLS and name-resolution errors into that text; it does no I/O.
"""

from __future__ import annotations

import errno
import socket
import ssl
from enum import StrEnum

from ome_routing.core.durations import Duration

UNREACHABLE = "capacity endpoint unreachable: "
HTTP_STATUS = "capacity endpoint returned HTTP "
READING = "reading capacity response: "
INCOMPLETE = "capacity request did not complete: "
INVALID_TARGET = "capacity target is invalid: "
INVALID_URL = "capacity request URL is invalid: "
UNBUILDABLE = "capacity request could not be built: "
NOT_SUBMITTED = "capacity observation could not be submitted: "


class Outcome(StrEnum):
    """How a poll ended, for counting: one value per family of the fallback table."""

    OK = "ok"
    STALE = "stale"
    FUTURE = "future"
    UNREACHABLE = "unreachable"
    HTTP_STATUS = "http_status"
    INVALID_REPORT = "invalid_report"
    READ_FAILED = "read_failed"
    INCOMPLETE = "incomplete"
    INVALID_REQUEST = "invalid_request"
    NOT_SUBMITTED = "not_submitted"


class PollFailure(Exception):
    """A poll that produced no reading; `reason` is the fallback reason."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


def unreachable(detail: str) -> PollFailure:
    return PollFailure(Outcome.UNREACHABLE, UNREACHABLE + detail)


def http_status(status: int) -> PollFailure:
    return PollFailure(Outcome.HTTP_STATUS, f"{HTTP_STATUS}{status}")


def reading_failed(detail: str) -> PollFailure:
    return PollFailure(Outcome.READ_FAILED, READING + detail)


def too_large(limit: int) -> PollFailure:
    return reading_failed(f"response exceeds configured limit of {limit} bytes")


def incomplete(detail: str) -> PollFailure:
    return PollFailure(Outcome.INCOMPLETE, INCOMPLETE + detail)


def invalid_target(detail: str) -> PollFailure:
    return PollFailure(Outcome.INVALID_REQUEST, INVALID_TARGET + detail)


def invalid_url(detail: str) -> PollFailure:
    return PollFailure(Outcome.INVALID_REQUEST, INVALID_URL + detail)


def unbuildable(detail: str) -> PollFailure:
    return PollFailure(Outcome.INVALID_REQUEST, UNBUILDABLE + detail)


def not_submitted(detail: str) -> PollFailure:
    return PollFailure(Outcome.NOT_SUBMITTED, NOT_SUBMITTED + detail)


def timed_out(timeout: Duration) -> str:
    return f"timed out after {timeout}"


_DNS_NOT_FOUND = {
    getattr(socket, name)
    for name in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY")
    if hasattr(socket, name)
}


def os_error_text(err: OSError) -> str:
    """A socket error as a short lower-case text: `connection refused`, `network is unreachable`."""
    if err.errno == errno.ECONNREFUSED:
        return "connection refused"
    if err.errno is not None and err.strerror:
        return err.strerror[:1].lower() + err.strerror[1:]
    return _short(err)


def _ssl_text(err: BaseException) -> str:
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {err.verify_message}"
    reason = getattr(err, "reason", None)
    if isinstance(reason, str) and reason:
        return "TLS handshake failed: " + reason.replace("_", " ").lower()
    return "TLS handshake failed"


def resolve_failure(err: OSError) -> PollFailure:
    """The endpoint's host name did not resolve."""
    if isinstance(err, socket.gaierror) and err.errno not in _DNS_NOT_FOUND:
        return unreachable(f"name resolution failed: {os_error_text(err)}")
    return unreachable("no such host")


def connect_failure(err: BaseException) -> PollFailure:
    """No connection could be made (refused, unroutable, TLS handshake failed)."""
    if isinstance(err, ssl.SSLError | ssl.CertificateError):
        return unreachable(_ssl_text(err))
    if isinstance(err, OSError):
        return unreachable(os_error_text(err))
    return unreachable(_short(err))


def _short(err: BaseException) -> str:
    """A one-line text for an error without a better description."""
    text = str(err).strip().splitlines()
    return text[0] if text and text[0] else type(err).__name__
