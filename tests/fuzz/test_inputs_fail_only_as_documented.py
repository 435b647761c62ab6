"""Whatever a reporter, a user or an operator writes, the controller fails only as documented.

Report bodies, drain annotations, `spec.routing` blocks and chart values, random and
almost right, either parse or raise the one documented error of their reader, and that
error's text names what was wrong: a report's field (or the spec's own reason), the
annotation, `spec.routing...` (or the poll fields that OME's message for an incomplete
poll lists), or the chart field's path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import JSON, NEAR, TIMEOUT, profile, shaped

from ome_routing.core.config import ConfigError, config_from_values
from ome_routing.core.drains import ANNOTATION, DrainAnnotationError, parse_drains
from ome_routing.core.policy import (
    CAPACITY_FIELDS,
    RESOLVE_PREFIX,
    ROUTING_FIELDS,
    VALIDATE_PREFIX,
    PolicyError,
    resolve_routing_policy,
)
from ome_routing.core.report import (
    INVALID_PREFIX,
    NO_OBSERVED_AT,
    NO_SERVABLE,
    ReportError,
    parse_report,
)

pytestmark = pytest.mark.timeout(TIMEOUT)

ROUTING_ON: dict[str, Any] = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}
CONFIG = config_from_values(ROUTING_ON)

# -- report bodies ---------------------------------------------------------------------

STAMPS = st.sampled_from(
    [
        "2026-11-30T10:00:00Z",
        "2026-11-30T10:00:00+01:00",
        "2026-11-30T10:00:00.123456789Z",
        "2026-11-30 10:00:00",
        "2026-13-40T99:99:99Z",
        "2026-11-30T10:00:00+25:00",
        "",
        "now",
    ]
) | st.text(max_size=30)
REPORTS = st.fixed_dictionaries(
    {}, optional={"servable": NEAR | JSON, "observedAt": STAMPS | JSON, "extra": JSON}
)
BODIES = (
    st.binary(max_size=200)
    | st.sampled_from([b'{"servable": Infinity}', b"NaN", b'{"servable": 1e999}'])
    | JSON.map(lambda v: json.dumps(v).encode())
    | REPORTS.map(lambda v: json.dumps(v).encode())
)
GO_TIME_ERRORS = tuple(INVALID_PREFIX + p for p in ("parsing time ", "Time.UnmarshalJSON: "))
NEGATIVE = re.compile(r"^capacity report is negative \(-\d+\)$")


@given(BODIES)
@profile()
def test_a_report_body_parses_or_fails_with_a_guide_reason(body: bytes) -> None:
    try:
        parse_report(body)
    except ReportError as err:
        reason = str(err)
        assert (
            reason.startswith(INVALID_PREFIX)
            or reason in (NO_SERVABLE, NO_OBSERVED_AT)
            or (NEGATIVE.match(reason))
        ), reason


@given(REPORTS)
@profile()
def test_a_wrong_report_object_names_its_field(report: dict[str, Any]) -> None:
    try:
        parse_report(json.dumps(report).encode())
    except ReportError as err:
        reason = str(err)
        # Go's own time errors (OME's text, verbatim) can only be about observedAt.
        assert (
            "servable" in reason
            or "observedAt" in reason
            or NEGATIVE.match(reason)
            or reason.startswith(GO_TIME_ERRORS)
        ), reason


# -- drain annotations -------------------------------------------------------------------

DRAIN_IDS = st.sampled_from(["maint-1", "a", "", "UPPER", "x" * 80, "bad id", "-x"]) | st.text(
    max_size=12
)
DRAIN = st.fixed_dictionaries(
    {}, optional={"cluster": NEAR | JSON, "reason": NEAR | JSON, "until": JSON}
)
ANNOTATIONS = (
    st.text(max_size=200)
    | JSON.map(json.dumps)
    | st.dictionaries(DRAIN_IDS, DRAIN | JSON, max_size=4).map(json.dumps)
)


@given(ANNOTATIONS)
@profile()
def test_a_drain_annotation_parses_or_fails_naming_the_annotation(text: str) -> None:
    try:
        parse_drains(text)
    except DrainAnnotationError as err:
        assert str(err).startswith(f"parse {ANNOTATION}: "), str(err)


# -- spec.routing ------------------------------------------------------------------------

ROUTING = shaped([*ROUTING_FIELDS, *CAPACITY_FIELDS, "disabled", "weight"])


@given(ROUTING | st.fixed_dictionaries({}, optional={"capacity": ROUTING, "enabled": NEAR}))
@profile()
def test_a_routing_block_resolves_or_fails_naming_spec_routing(routing: Any) -> None:
    try:
        resolve_routing_policy(routing, CONFIG)
    except PolicyError as err:
        line = str(err)
        assert line.startswith((VALIDATE_PREFIX, RESOLVE_PREFIX)), line
        # OME's own message for an incomplete poll lists the fields it needs instead.
        assert "spec.routing" in line or any(f in line for f in CAPACITY_FIELDS), line


# -- chart values ------------------------------------------------------------------------

CHART_KEYS = [
    "ome",
    "multicluster",
    "enabled",
    "role",
    "config",
    "routing",
    "capacity",
    "observer",
    "probe",
    "maxConcurrentReconciles",
    "maxConcurrentRequests",
    "maxResponseBytes",
    "minPeriod",
    "maxSamples",
    *CAPACITY_FIELDS,
]
FIELD_PATH = re.compile(r"^(?:routing|multicluster|ome|config)(?:\.[A-Za-z]+)*\b")
VALUES = shaped(CHART_KEYS, depth=4) | st.fixed_dictionaries(
    {
        "ome": st.fixed_dictionaries(
            {
                "multicluster": st.fixed_dictionaries(
                    {"enabled": st.just(True) | NEAR, "role": st.just("control-plane") | NEAR},
                    optional={
                        "config": st.fixed_dictionaries(
                            {}, optional={"routing": shaped(CHART_KEYS, depth=3)}
                        )
                    },
                )
            }
        )
    }
)


@given(VALUES)
@profile()
def test_chart_values_load_or_fail_naming_the_field(values: Any) -> None:
    if not isinstance(values, dict):
        values = {"ome": values}
    try:
        config_from_values(values)
    except ConfigError as err:
        assert FIELD_PATH.match(err.detail), err.detail
