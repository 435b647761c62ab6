"""`kubectl ome`: the code each capacity fallback reason shows as, as OME's CLI classifies it."""

from __future__ import annotations

import pytest

from ome_routing.core import capacity, report
from ome_routing.core.durations import parse_duration
from ome_routing.kubectl.fallback import MEANINGS, FallbackCode, codes_help, fallback_code
from ome_routing.observer import failures

# --- fallback codes ---------------------------------------------------------------------

#: OME's classifier table (`kubectl ome placement endpoint`, v1.3), one row per reason.
OME_FALLBACK_TABLE = [
    ("", FallbackCode.NOT_RECORDED),
    ("no capacity report yet", FallbackCode.NO_REPORT),
    ("capacity target is invalid: no host in endpoint", FallbackCode.INVALID_TARGET),
    ("capacity clock is not configured", FallbackCode.CLOCK_UNAVAILABLE),
    ("capacity observer executor is not configured", FallbackCode.OBSERVER_UNAVAILABLE),
    ("capacity observation could not be submitted: stopped", FallbackCode.OBSERVER_UNAVAILABLE),
    ("capacity endpoint unreachable: connection refused", FallbackCode.UNREACHABLE),
    ("capacity endpoint returned HTTP 404", FallbackCode.HTTP_ERROR),
    ("capacity endpoint returned HTTP 503", FallbackCode.HTTP_ERROR),
    (
        "reading capacity response: response exceeds configured limit of 65536 bytes",
        FallbackCode.RESPONSE_READ_ERROR,
    ),
    ("capacity request did not complete: timed out after 3s", FallbackCode.REQUEST_INCOMPLETE),
    ("capacity report is negative (-1)", FallbackCode.INVALID_REPORT),
    ("capacity report timestamp is in the future", FallbackCode.INVALID_REPORT),
    (
        "capacity report is stale (at least configured maximum age 40s)",
        FallbackCode.STALE_REPORT,
    ),
    ("capacity report awaiting quorum (1/3 accepted samples)", FallbackCode.AWAITING_QUORUM),
    (
        "capacity report awaiting quorum after stale samples expired (2/3 accepted samples)",
        FallbackCode.AWAITING_QUORUM,
    ),
    (
        "capacity response is not a valid report: unexpected end of JSON input",
        FallbackCode.OTHER,
    ),
    ("capacity report has no servable count", FallbackCode.OTHER),
    ("capacity report has no observedAt stamp", FallbackCode.OTHER),
    ("capacity request URL is invalid: parse error", FallbackCode.OTHER),
    ("capacity report unavailable", FallbackCode.OTHER),
    ("a reason a newer controller writes", FallbackCode.OTHER),
    ("capacity endpoint returned HTTP" + "404", FallbackCode.OTHER),  # no space: not OME's prefix
]

#: Reasons OME's CLI refuses to classify: over 4096 bytes, not UTF-8, control characters.
MALFORMED_REASONS = [
    pytest.param("capacity endpoint unreachable: " + "x" * 4066, id="4097-bytes"),
    pytest.param("capacity endpoint unreachable: " + "é" * 2033, id="4097-bytes-in-2064-chars"),
    pytest.param("capacity endpoint unreachable: \udcff", id="lone-surrogate"),
    pytest.param(b"capacity endpoint unreachable: \xff", id="invalid-utf8-bytes"),
    pytest.param("capacity endpoint returned HTTP 404\nInjected   row", id="line-break"),
    pytest.param("capacity report is stale (\x1b[2J)", id="escape"),
    pytest.param("no capacity report yet\x7f", id="delete"),
    pytest.param("capacity endpoint unreachable: \x85", id="c1-control"),
    pytest.param("capacity endpoint unreachable: \t", id="tab"),
]

#: This project's reason writers, each with the code its text must get.
PROJECT_REASONS = [
    (capacity.NO_REPORT_YET, FallbackCode.NO_REPORT),
    (capacity.awaiting_quorum_reason(1, 3), FallbackCode.AWAITING_QUORUM),
    (capacity.expired_reason(2, 3), FallbackCode.AWAITING_QUORUM),
    (report.stale_reason(parse_duration("40s")), FallbackCode.STALE_REPORT),
    (report.FUTURE, FallbackCode.INVALID_REPORT),
    (report.negative_reason(-1), FallbackCode.INVALID_REPORT),
    (report.INVALID_PREFIX + "empty body", FallbackCode.OTHER),
    (report.NO_SERVABLE, FallbackCode.OTHER),
    (report.NO_OBSERVED_AT, FallbackCode.OTHER),
    (failures.unreachable("connection refused").reason, FallbackCode.UNREACHABLE),
    (
        failures.unreachable(failures.timed_out(parse_duration("3s"))).reason,
        FallbackCode.UNREACHABLE,
    ),
    (failures.http_status(404).reason, FallbackCode.HTTP_ERROR),
    (failures.too_large(65536).reason, FallbackCode.RESPONSE_READ_ERROR),
    (failures.reading_failed("connection reset").reason, FallbackCode.RESPONSE_READ_ERROR),
    (failures.incomplete("timed out after 3s").reason, FallbackCode.REQUEST_INCOMPLETE),
    (failures.invalid_target("no host").reason, FallbackCode.INVALID_TARGET),
    (failures.invalid_url("http://[").reason, FallbackCode.OTHER),
    (failures.unbuildable("bad method").reason, FallbackCode.OTHER),
    (failures.not_submitted("observer stopped").reason, FallbackCode.OBSERVER_UNAVAILABLE),
]


class TestFallbackCodes:
    @pytest.mark.parametrize(("reason", "code"), OME_FALLBACK_TABLE)
    def test_each_row_of_omes_table_gets_its_code(self, reason: str, code: FallbackCode) -> None:
        assert fallback_code(reason) is code

    @pytest.mark.parametrize("reason", MALFORMED_REASONS)
    def test_a_reason_too_long_not_utf8_or_with_control_characters_is_malformed(
        self, reason: str | bytes
    ) -> None:
        assert fallback_code(reason) is FallbackCode.MALFORMED_PAYLOAD

    def test_a_reason_of_exactly_4096_bytes_is_classified(self) -> None:
        reason = "capacity endpoint unreachable: " + "x" * 4065
        assert len(reason.encode()) == 4096
        assert fallback_code(reason) is FallbackCode.UNREACHABLE

    @pytest.mark.parametrize(("reason", "code"), PROJECT_REASONS)
    def test_the_reasons_this_project_writes_get_omes_codes(
        self, reason: str, code: FallbackCode
    ) -> None:
        assert fallback_code(reason) is code

    def test_every_poll_outcome_is_among_the_project_reasons(self) -> None:
        """The writer table above covers every way a poll fails, so a new one gets a row."""
        covered = {
            failures.unreachable("x").outcome,
            failures.http_status(500).outcome,
            failures.too_large(1).outcome,
            failures.incomplete("x").outcome,
            failures.invalid_target("x").outcome,
            failures.not_submitted("x").outcome,
            failures.Outcome.STALE,
            failures.Outcome.FUTURE,
            failures.Outcome.INVALID_REPORT,
        }
        assert covered == {o for o in failures.Outcome if o is not failures.Outcome.OK}

    def test_no_reason_is_not_recorded(self) -> None:
        assert fallback_code(None) is FallbackCode.NOT_RECORDED

    def test_a_reason_that_is_not_text_is_malformed(self) -> None:
        assert fallback_code(42) is FallbackCode.MALFORMED_PAYLOAD

    def test_every_code_is_explained_in_help(self) -> None:
        assert set(MEANINGS) == set(FallbackCode)
        for code in FallbackCode:
            assert f"{code.value}: " in codes_help()
