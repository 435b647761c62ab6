"""The operator's multi-cluster configuration: chart values, gates, observer limits, the chart's poll.

The rules of a poll block are shared with `spec.routing.capacity`; the table of them
(`POLL_RULES`) runs through both the chart and a service here.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DROP, with_overrides
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.config import (
    ConfigError,
    OperatorConfig,
    config_from_multicluster,
    config_from_values,
)
from ome_routing.core.durations import Duration, parse_duration
from ome_routing.core.policy import PolicyError, resolve_routing_policy
from ome_routing.core.pollrules import CapacityPolicy, ObserverLimits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PREFIX = "invalid multi-cluster configuration: "


# --- builders -------------------------------------------------------------------------


def a_poll(**overrides: Any) -> dict[str, Any]:
    """The spec's Step 1 poll, with overrides; `DROP` removes a field."""
    return with_overrides(
        {
            "path": "/capacity",
            "method": "GET",
            "format": "Report",
            "samples": 10,
            "quorum": 2,
            "period": "10s",
            "timeout": "3s",
            "maxAge": "30s",
        },
        overrides,
    )


def values_with(
    *,
    capacity: Any = DROP,
    observer: Any = DROP,
    enabled: Any = True,
    role: Any = "control-plane",
    routing_enabled: Any = True,
    **routing_extra: Any,
) -> dict[str, Any]:
    """A values file with routing on (by default) and the given routing blocks."""
    routing: dict[str, Any] = {"enabled": routing_enabled, **routing_extra}
    if capacity is not DROP:
        routing["capacity"] = capacity
    if observer is not DROP:
        routing["observer"] = observer
    return {
        "ome": {
            "multicluster": {
                "enabled": enabled,
                "role": role,
                "config": {"routing": routing},
            }
        }
    }


def config_error(values: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        config_from_values(values)
    return str(caught.value)


def step1_values() -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


# --- the spec's examples ----------------------------------------------------------------


class TestSpecExamples:
    def test_step1_values_file_turns_routing_on_with_the_chart_poll(self) -> None:
        config = config_from_values(step1_values())
        assert config.routing_active
        assert config.capacity == CapacityPolicy(
            path="/capacity",
            method="GET",
            format="Report",
            samples=10,
            quorum=2,
            period=parse_duration("10s"),
            timeout=parse_duration("3s"),
            max_age=parse_duration("30s"),
        )
        assert config.observer == ObserverLimits()

    @pytest.mark.parametrize(
        ("overrides", "observer", "message"),
        [
            (
                {"period": 10},
                DROP,
                'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")',
            ),
            (
                {"period": "10"},
                DROP,
                'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")',
            ),
            (
                {"timeout": "10s"},
                DROP,
                "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)",
            ),
            (
                {"period": "500ms", "timeout": "200ms", "maxAge": "5s"},
                DROP,
                "routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
            ),
            (
                {},
                {"maxSamples": 0},
                "routing.observer.maxSamples must be positive when routing is enabled",
            ),
            (
                {},
                {"maxSamples": None},
                "routing.observer.maxSamples must be positive when routing is enabled",
            ),
        ],
        ids=[
            "period-int",
            "period-text",
            "timeout",
            "min-period",
            "max-samples-0",
            "max-samples-null",
        ],
    )
    def test_troubleshooting_messages_read_word_for_word(
        self, overrides: dict[str, Any], observer: Any, message: str
    ) -> None:
        values = values_with(capacity=a_poll(**overrides), observer=observer)
        assert config_error(values) == PREFIX + message

    def test_period_10_in_yaml_is_read_as_the_text_10(self) -> None:
        text = (EXAMPLES / "values.yaml").read_text().replace("period: 10s", "period: 10")
        assert config_error(yaml.safe_load(text)) == (
            PREFIX + 'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")'
        )

    def test_observer_null_limit_from_yaml_is_an_error(self) -> None:
        text = (
            EXAMPLES / "values.yaml"
        ).read_text() + "        observer:\n          maxSamples: null\n"
        assert config_error(yaml.safe_load(text)) == (
            PREFIX + "routing.observer.maxSamples must be positive when routing is enabled"
        )


# --- whether routing is on ------------------------------------------------------------


class TestRoutingGates:
    @pytest.mark.parametrize(
        "values", [{}, {"ome": None}, {"ome": {}}, {"ome": {"multicluster": None}}]
    )
    def test_missing_multicluster_block_means_off_with_defaults(
        self, values: dict[str, Any]
    ) -> None:
        assert config_from_values(values) == OperatorConfig()
        assert not config_from_values(values).routing_active

    @pytest.mark.parametrize("enabled", [True, False])
    @pytest.mark.parametrize("role", ["control-plane", ""])
    @pytest.mark.parametrize("routing_enabled", [True, False])
    def test_routing_is_active_only_with_all_three_gates(
        self, enabled: bool, role: str, routing_enabled: bool
    ) -> None:
        config = config_from_values(
            values_with(
                capacity=a_poll(), enabled=enabled, role=role, routing_enabled=routing_enabled
            )
        )
        expected = enabled and role == "control-plane" and routing_enabled
        assert config.routing_active is expected
        assert (config.capacity is not None) is expected

    @pytest.mark.parametrize(
        ("gate", "value"),
        [("enabled", False), ("role", ""), ("routing_enabled", False)],
    )
    def test_routing_blocks_are_not_judged_while_routing_is_off(
        self, gate: str, value: Any
    ) -> None:
        values = values_with(
            capacity=a_poll(period="10"), observer={"maxSamples": 0, "typo": 1}, **{gate: value}
        )
        config = config_from_values(values)
        assert not config.routing_active
        assert config.capacity is None
        assert config.observer == ObserverLimits()

    def test_missing_gates_default_to_off(self) -> None:
        assert config_from_values({"ome": {"multicluster": {"config": {"routing": {}}}}}) == (
            OperatorConfig()
        )

    @pytest.mark.parametrize(
        ("gate", "value", "message"),
        [
            ("enabled", "true", 'multicluster.enabled must be true or false, got "true"'),
            ("enabled", 1, "multicluster.enabled must be true or false, got 1"),
            ("routing_enabled", "yes", 'routing.enabled must be true or false, got "yes"'),
            ("role", "worker", 'multicluster.role "worker" must be "control-plane" or empty'),
            (
                "role",
                "Control-Plane",
                'multicluster.role "Control-Plane" must be "control-plane" or empty',
            ),
            ("role", 3, "multicluster.role must be a string, got 3"),
        ],
    )
    def test_bad_gate_values_are_named(self, gate: str, value: Any, message: str) -> None:
        assert config_error(values_with(**{gate: value})) == PREFIX + message

    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ({"ome": []}, "ome must be a mapping of fields, got []"),
            (
                {"ome": {"multicluster": "on"}},
                'ome.multicluster must be a mapping of fields, got "on"',
            ),
            ({"ome": {"multicluster": {"config": 1}}}, "config must be a mapping of fields, got 1"),
            (
                {"ome": {"multicluster": {"config": {"routing": True}}}},
                "routing must be a mapping of fields, got true",
            ),
        ],
    )
    def test_blocks_of_the_wrong_shape_are_named(
        self, values: dict[str, Any], message: str
    ) -> None:
        assert config_error(values) == PREFIX + message

    def test_the_multicluster_block_alone_reads_like_the_values_file(self) -> None:
        block = step1_values()["ome"]["multicluster"]
        assert config_from_multicluster(block) == config_from_values(step1_values())
        assert config_from_multicluster(None) == OperatorConfig()

    def test_the_multicluster_block_alone_reports_the_same_errors(self) -> None:
        block = values_with(capacity=a_poll(timeout="10s"))["ome"]["multicluster"]
        with pytest.raises(ConfigError) as caught:
            config_from_multicluster(block)
        assert str(caught.value) == (
            PREFIX
            + "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)"
        )

    def test_config_error_is_a_value_error_whose_text_is_the_whole_line(self) -> None:
        with pytest.raises(ValueError) as caught:
            config_from_values(values_with(observer={"minPeriod": 0}))
        assert isinstance(caught.value, ConfigError)
        assert caught.value.detail == (
            "routing.observer.minPeriod must be positive when routing is enabled"
        )
        assert str(caught.value) == PREFIX + caught.value.detail

    def test_probe_and_publisher_blocks_are_kept_raw(self) -> None:
        probe = {"path": "/healthz", "period": "5s"}
        publisher = {"name": "httproute"}
        config = config_from_values(values_with(probe=probe, publisher=publisher))
        assert config.probe == probe
        assert config.publisher == publisher

    def test_probe_must_be_a_mapping(self) -> None:
        assert config_error(values_with(probe="on")) == (
            PREFIX + 'routing.probe must be a mapping of fields, got "on"'
        )


# --- the observer limits -----------------------------------------------------------------

LIMITS = [
    "maxConcurrentReconciles",
    "maxConcurrentRequests",
    "maxResponseBytes",
    "minPeriod",
    "maxSamples",
]
ATTRIBUTES = {
    "maxConcurrentReconciles": "max_concurrent_reconciles",
    "maxConcurrentRequests": "max_concurrent_requests",
    "maxResponseBytes": "max_response_bytes",
    "minPeriod": "min_period",
    "maxSamples": "max_samples",
}
SET_VALUES: dict[str, tuple[Any, Any]] = {
    "maxConcurrentReconciles": (3, 3),
    "maxConcurrentRequests": (64, 64),
    "maxResponseBytes": (1024, 1024),
    "minPeriod": ("250ms", parse_duration("250ms")),
    "maxSamples": (7, 7),
}


class TestObserverLimits:
    def test_chart_defaults(self) -> None:
        limits = config_from_values(values_with()).observer
        assert limits == ObserverLimits(
            max_concurrent_reconciles=8,
            max_concurrent_requests=16,
            max_response_bytes=65536,
            min_period=Duration.parse("1s"),
            max_samples=100,
        )

    @pytest.mark.parametrize("left_out", LIMITS)
    def test_a_limit_left_out_keeps_its_default(self, left_out: str) -> None:
        observer = {key: SET_VALUES[key][0] for key in LIMITS if key != left_out}
        limits = config_from_values(values_with(observer=observer)).observer
        assert getattr(limits, ATTRIBUTES[left_out]) == getattr(
            ObserverLimits(), ATTRIBUTES[left_out]
        )
        for key in LIMITS:
            if key != left_out:
                assert getattr(limits, ATTRIBUTES[key]) == SET_VALUES[key][1]

    @pytest.mark.parametrize(
        ("limit", "value"),
        [(limit, value) for limit in LIMITS for value in (0, None)]
        + [(limit, -1) for limit in LIMITS if limit != "minPeriod"]
        + [("minPeriod", "0s"), ("minPeriod", "-1s")],
    )
    def test_a_limit_set_to_zero_null_or_negative_stops_the_controller(
        self, limit: str, value: Any
    ) -> None:
        assert config_error(values_with(observer={limit: value})) == (
            PREFIX + f"routing.observer.{limit} must be positive when routing is enabled"
        )

    def test_limits_are_required_even_without_a_poll_or_probe(self) -> None:
        values = values_with(observer={"maxConcurrentRequests": 0})
        assert "capacity" not in values["ome"]["multicluster"]["config"]["routing"]
        assert config_error(values) == (
            PREFIX
            + "routing.observer.maxConcurrentRequests must be positive when routing is enabled"
        )

    def test_a_null_observer_block_removes_every_limit(self) -> None:
        assert config_error(values_with(observer=None)) == (
            PREFIX
            + "routing.observer.maxConcurrentReconciles must be positive when routing is enabled"
        )

    @pytest.mark.parametrize("limit", [k for k in LIMITS if k != "minPeriod"])
    @pytest.mark.parametrize(
        ("value", "shown"), [("16", '"16"'), (2.5, "2.5"), (True, "true"), ([1], "[1]")]
    )
    def test_a_numeric_limit_of_the_wrong_type_is_named(
        self, limit: str, value: Any, shown: str
    ) -> None:
        assert config_error(values_with(observer={limit: value})) == (
            PREFIX + f"routing.observer.{limit} must be a whole number, got {shown}"
        )

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            (1, 'routing.observer.minPeriod: "1" is not a duration (use forms like "30s", "5m")'),
            (
                "1 s",
                'routing.observer.minPeriod: "1 s" is not a duration (use forms like "30s", "5m")',
            ),
            (True, 'routing.observer.minPeriod must be a duration such as "10s", got true'),
        ],
    )
    def test_min_period_must_be_a_duration(self, value: Any, message: str) -> None:
        assert config_error(values_with(observer={"minPeriod": value})) == PREFIX + message

    @pytest.mark.parametrize("typo", ["maxSample", "minperiod", "maxConcurrentRequest"])
    def test_an_unknown_observer_key_is_named(self, typo: str) -> None:
        assert config_error(values_with(observer={typo: 5})) == (
            PREFIX
            + f"routing.observer.{typo} is not a known field (known: maxConcurrentReconciles, "
            "maxConcurrentRequests, maxResponseBytes, minPeriod, maxSamples)"
        )

    def test_observer_must_be_a_mapping(self) -> None:
        assert config_error(values_with(observer=[8])) == (
            PREFIX + "routing.observer must be a mapping of fields, got [8]"
        )

    def test_the_chart_poll_is_checked_against_the_configured_limits(self) -> None:
        values = values_with(
            capacity=a_poll(samples=150, period="2s", timeout="1s", maxAge="10s"),
            observer={"maxSamples": 200, "minPeriod": "2s"},
        )
        assert config_from_values(values).capacity is not None
        values = values_with(
            capacity=a_poll(period="2s", timeout="1s", maxAge="10s"),
            observer={"minPeriod": "2500ms"},
        )
        assert config_error(values) == (
            PREFIX
            + "routing.capacity.period (2s) must be at least routing.observer.minPeriod (2.5s)"
        )


# --- the chart's poll ----------------------------------------------------------------------

REQUIRED = ["method", "format", "samples", "quorum", "period", "timeout", "maxAge"]


class TestChartPoll:
    @pytest.mark.parametrize("capacity", [None, {}, {"path": None}, {"path": ""}])
    def test_no_block_or_no_path_means_no_chart_poll(self, capacity: Any) -> None:
        config = config_from_values(values_with(capacity=capacity))
        assert config.routing_active
        assert config.capacity is None

    @pytest.mark.parametrize("missing", REQUIRED)
    def test_once_path_is_set_every_field_but_options_is_required(self, missing: str) -> None:
        assert config_error(values_with(capacity=a_poll(**{missing: DROP}))) == (
            PREFIX + f"routing.capacity.{missing} is required once routing.capacity.path is set"
        )

    @pytest.mark.parametrize("missing", REQUIRED)
    def test_a_null_field_counts_as_missing(self, missing: str) -> None:
        assert config_error(values_with(capacity=a_poll(**{missing: None}))) == (
            PREFIX + f"routing.capacity.{missing} is required once routing.capacity.path is set"
        )

    def test_fields_without_a_path_are_an_error_not_silence(self) -> None:
        capacity = {"samples": 10, "period": "10s"}
        assert config_error(values_with(capacity=capacity)) == (
            PREFIX + "routing.capacity sets samples, period but not path: "
            "set routing.capacity.path to turn the poll on, or remove the block"
        )

    def test_options_may_be_left_out_or_empty(self) -> None:
        assert config_from_values(values_with(capacity=a_poll(options={}))).capacity == (
            config_from_values(values_with(capacity=a_poll())).capacity
        )

    def test_disabled_is_not_a_chart_field(self) -> None:
        message = config_error(values_with(capacity={"disabled": True}))
        assert message.startswith(PREFIX + "routing.capacity.disabled is not a known field")

    def test_durations_print_as_go_prints_them(self) -> None:
        values = values_with(capacity=a_poll(period="90s", timeout="1m30s", maxAge="5m"))
        assert config_error(values) == (
            PREFIX
            + "routing.capacity.timeout (1m30s) must be shorter than routing.capacity.period (1m30s)"
        )


# --- the poll rules, shared by the chart and a service ----------------------------------------

KNOWN = "path, method, format, options, samples, quorum, period, timeout, maxAge"

#: (id, overrides, stage, detail with {f} for the block's field prefix)
POLL_RULES: list[tuple[str, dict[str, Any], str, str]] = [
    # paths
    ("path-relative", {"path": "capacity"}, "validate", '{f}.path "capacity" must start with "/"'),
    ("path-url", {"path": "http://x/c"}, "validate", '{f}.path "http://x/c" must start with "/"'),
    ("path-type", {"path": 5}, "validate", "{f}.path must be a string, got 5"),
    # methods
    ("method-head", {"method": "HEAD"}, "validate", '{f}.method "HEAD" must be GET or POST'),
    ("method-lower", {"method": "get"}, "validate", '{f}.method "get" must be GET or POST'),
    ("method-put", {"method": "PUT"}, "validate", '{f}.method "PUT" must be GET or POST'),
    ("method-type", {"method": ["GET"]}, "validate", '{f}.method must be a string, got ["GET"]'),
    # formats and options
    ("format-empty", {"format": ""}, "validate", '{f}.format must name a format, such as "Report"'),
    ("format-type", {"format": 1}, "validate", "{f}.format must be a string, got 1"),
    (
        "format-unknown",
        {"format": "report"},
        "resolve",
        '{f}.format "report" is not registered in this build (available: [Report])',
    ),
    (
        "format-prometheus",
        {"format": "Prometheus"},
        "resolve",
        '{f}.format "Prometheus" is not registered in this build (available: [Report])',
    ),
    (
        "options-report",
        {"options": {"field": "ready"}},
        "resolve",
        '{f}.options {{"field": "ready"}} must be left out: format Report takes none',
    ),
    (
        "options-type",
        {"options": ["a"]},
        "validate",
        '{f}.options must be a mapping of fields, got ["a"]',
    ),
    (
        "options-value",
        {"options": {"a": 1}},
        "validate",
        '{f}.options["a"] must be a string, got 1',
    ),
    # samples and quorum
    ("samples-0", {"samples": 0, "quorum": 1}, "validate", "{f}.samples (0) must be at least 1"),
    ("samples-neg", {"samples": -3}, "validate", "{f}.samples (-3) must be at least 1"),
    ("quorum-0", {"quorum": 0}, "validate", "{f}.quorum (0) must be at least 1"),
    ("quorum-neg", {"quorum": -1}, "validate", "{f}.quorum (-1) must be at least 1"),
    (
        "quorum-over-samples",
        {"samples": 4, "quorum": 5, "maxAge": "60s"},
        "validate",
        "{f}.quorum (5) must not exceed {f}.samples (4)",
    ),
    (
        "samples-over-max",
        {"samples": 200},
        "resolve",
        "{f}.samples (200) must not exceed routing.observer.maxSamples (100)",
    ),
    ("samples-text", {"samples": "10"}, "validate", '{f}.samples must be a whole number, got "10"'),
    ("samples-float", {"samples": 2.5}, "validate", "{f}.samples must be a whole number, got 2.5"),
    ("samples-bool", {"samples": True}, "validate", "{f}.samples must be a whole number, got true"),
    ("quorum-text", {"quorum": "2"}, "validate", '{f}.quorum must be a whole number, got "2"'),
    # durations
    (
        "period-min",
        {"period": "500ms", "timeout": "100ms", "maxAge": "5s"},
        "resolve",
        "{f}.period (500ms) must be at least routing.observer.minPeriod (1s)",
    ),
    ("period-zero", {"period": "0s"}, "validate", "{f}.period (0s) must be positive"),
    ("period-zero-int", {"period": 0}, "validate", "{f}.period (0s) must be positive"),
    ("period-neg", {"period": "-10s"}, "validate", "{f}.period (-10s) must be positive"),
    ("timeout-zero", {"timeout": "0"}, "validate", "{f}.timeout (0s) must be positive"),
    ("timeout-neg", {"timeout": "-1s"}, "validate", "{f}.timeout (-1s) must be positive"),
    (
        "timeout-equal",
        {"timeout": "10s"},
        "validate",
        "{f}.timeout (10s) must be shorter than {f}.period (10s)",
    ),
    (
        "timeout-longer",
        {"timeout": "1m"},
        "validate",
        "{f}.timeout (1m0s) must be shorter than {f}.period (10s)",
    ),
    ("max-age-zero", {"maxAge": "0s"}, "validate", "{f}.maxAge (0s) must be positive"),
    (
        "max-age-short",
        {"quorum": 3, "maxAge": "20s"},
        "validate",
        "{f}.maxAge (20s) must span at least quorum (3) period intervals",
    ),
    (
        "max-age-just-short",
        {"quorum": 2, "maxAge": "19.999s"},
        "validate",
        "{f}.maxAge (19.999s) must span at least quorum (2) period intervals",
    ),
    ("unknown-key", {"peroid": "10s"}, "validate", "{f}.peroid is not a known field (known: "),
]
DURATION_FIELDS = ["period", "timeout", "maxAge"]
for _name in DURATION_FIELDS:
    for _bad, _shown in [
        ("10", '"10"'),
        (10, '"10"'),
        ("ten seconds", '"ten seconds"'),
        ("1d", '"1d"'),
        ("10 s", '"10 s"'),
        (1.5, '"1.5"'),
    ]:
        POLL_RULES.append(
            (
                f"{_name}-not-duration-{_bad!r}",
                {_name: _bad},
                "validate",
                f'{{f}}.{_name}: {_shown} is not a duration (use forms like "30s", "5m")',
            )
        )
    for _bad, _shown in [(True, "true"), ([1], "[1]"), ({"s": 1}, '{{"s": 1}}')]:
        POLL_RULES.append(
            (
                f"{_name}-type-{_shown}",
                {_name: _bad},
                "validate",
                f'{{f}}.{_name} must be a duration such as "10s", got {_shown}',
            )
        )

SERVICE_PREFIX = {"validate": "validate routing policy: ", "resolve": "resolve capacity policy: "}


def _matches(actual: str, prefix: str, detail: str) -> bool:
    """The unknown-key row leaves out the list of known fields, which differs by scope."""
    if detail.endswith("(known: "):
        return actual.startswith(prefix + detail)
    return actual == prefix + detail


class TestPollRules:
    @pytest.mark.parametrize(
        ("overrides", "stage", "detail"),
        [pytest.param(o, s, d, id=i) for i, o, s, d in POLL_RULES],
    )
    def test_the_chart_poll_breaks_the_rule_at_startup(
        self, overrides: dict[str, Any], stage: str, detail: str
    ) -> None:
        message = config_error(values_with(capacity=a_poll(**overrides)))
        assert _matches(message, PREFIX, detail.format(f="routing.capacity"))

    @pytest.mark.parametrize(
        ("overrides", "stage", "detail"),
        [pytest.param(o, s, d, id=i) for i, o, s, d in POLL_RULES],
    )
    def test_a_service_poll_breaks_the_same_rule_with_its_own_field_names(
        self, overrides: dict[str, Any], stage: str, detail: str
    ) -> None:
        with pytest.raises(PolicyError) as caught:
            resolve_routing_policy({"capacity": a_poll(**overrides)}, OperatorConfig())
        assert caught.value.stage == stage
        assert _matches(
            str(caught.value), SERVICE_PREFIX[stage], detail.format(f="spec.routing.capacity")
        )

    def test_a_valid_poll_keeps_every_value(self) -> None:
        poll = a_poll(
            method="POST",
            path="/v1/capacity?x=1",
            samples=5,
            quorum=5,
            period="1s",
            timeout="999ms",
            maxAge="5s",
        )
        assert config_from_values(values_with(capacity=poll)).capacity == CapacityPolicy(
            path="/v1/capacity?x=1",
            method="POST",
            format="Report",
            samples=5,
            quorum=5,
            period=Duration.parse("1s"),
            timeout=Duration.parse("999ms"),
            max_age=Duration.parse("5s"),
        )


# --- properties ------------------------------------------------------------------------------

SECOND_NS = 1_000_000_000


@st.composite
def valid_polls(draw: st.DrawFn) -> dict[str, Any]:
    samples = draw(st.integers(1, 100))
    quorum = draw(st.integers(1, samples))
    period_ns = draw(st.integers(SECOND_NS, 3600 * SECOND_NS))
    timeout_ns = draw(st.integers(1, period_ns - 1))
    max_age_ns = draw(st.integers(quorum * period_ns, quorum * period_ns + 86400 * SECOND_NS))
    return a_poll(
        samples=samples,
        quorum=quorum,
        period=str(Duration(period_ns)),
        timeout=str(Duration(timeout_ns)),
        maxAge=str(Duration(max_age_ns)),
        method=draw(st.sampled_from(["GET", "POST"])),
    )


class TestPollProperties:
    @settings(max_examples=150, deadline=None)
    @given(valid_polls())
    def test_any_valid_combination_is_accepted_as_written(self, poll: dict[str, Any]) -> None:
        policy = config_from_values(values_with(capacity=poll)).capacity
        assert policy is not None
        assert (policy.samples, policy.quorum, policy.method) == (
            poll["samples"],
            poll["quorum"],
            poll["method"],
        )
        assert (str(policy.period), str(policy.timeout), str(policy.max_age)) == (
            poll["period"],
            poll["timeout"],
            poll["maxAge"],
        )

    @settings(max_examples=150, deadline=None)
    @given(st.integers(SECOND_NS, 3600 * SECOND_NS), st.integers(0, 3600 * SECOND_NS))
    def test_any_timeout_at_least_the_period_is_rejected(
        self, period_ns: int, extra_ns: int
    ) -> None:
        period, timeout = Duration(period_ns), Duration(period_ns + extra_ns)
        poll = a_poll(period=str(period), timeout=str(timeout), quorum=1, maxAge=str(period * 2))
        assert config_error(values_with(capacity=poll)) == (
            PREFIX + f"routing.capacity.timeout ({timeout}) must be shorter than "
            f"routing.capacity.period ({period})"
        )

    @settings(max_examples=150, deadline=None)
    @given(st.data())
    def test_any_max_age_under_quorum_periods_is_rejected(self, data: st.DataObject) -> None:
        quorum = data.draw(st.integers(1, 10))
        period_ns = data.draw(st.integers(SECOND_NS, 600 * SECOND_NS))
        max_age = Duration(data.draw(st.integers(1, quorum * period_ns - 1)))
        poll = a_poll(
            samples=10,
            quorum=quorum,
            period=str(Duration(period_ns)),
            timeout="1ms",
            maxAge=str(max_age),
        )
        assert config_error(values_with(capacity=poll)) == (
            PREFIX + f"routing.capacity.maxAge ({max_age}) must span at least quorum ({quorum}) "
            "period intervals"
        )

    @settings(max_examples=50, deadline=None)
    @given(st.dictionaries(st.sampled_from(LIMITS), st.integers(1, 10_000)))
    def test_limits_left_out_keep_defaults_and_set_limits_apply(
        self, observer: dict[str, int]
    ) -> None:
        raw = {k: (f"{v}ms" if k == "minPeriod" else v) for k, v in observer.items()}
        limits = config_from_values(values_with(observer=deepcopy(raw))).observer
        for key in LIMITS:
            expected = getattr(ObserverLimits(), ATTRIBUTES[key])
            if key in observer:
                expected = (
                    Duration(observer[key] * 1_000_000) if key == "minPeriod" else observer[key]
                )
            assert getattr(limits, ATTRIBUTES[key]) == expected
