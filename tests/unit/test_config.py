"""The operator's multi-cluster configuration: chart values, gates, observer limits, the chart's poll.

Messages and their order are OME's (`routing/config.go`, `controllerconfig/multicluster.go`):
duration syntax first, all of it joined; then the observer limits; then the poll.
A service's own poll has its own rules and wording: see test_policy.py.
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
from ome_routing.core.pollrules import CapacityPolicy, ObserverLimits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PREFIX = "invalid multi-cluster configuration: "
#: OME's prefix for a routing block it cannot decode (a value of the wrong type).
LOAD = "load multi-cluster configuration: unable to parse multicluster config json: "


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


def config_failure(values: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config_from_values(values)
    return caught.value


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

    def test_nothing_is_judged_while_multicluster_is_off(self) -> None:
        """OME does not load the block at all: no errors, no warnings."""
        values = values_with(
            capacity=a_poll(period="10", peroid="1s"), observer={"maxSamples": 0}, enabled=False
        )
        config = config_from_values(values)
        assert not config.routing_active
        assert config.capacity is None
        assert config.observer == ObserverLimits()
        assert config.warnings == ()

    def test_routing_settings_are_validated_whatever_the_role(self) -> None:
        """OME checks the routing block whenever multi-cluster and routing are on."""
        assert config_error(values_with(capacity=a_poll(timeout="10s"), role="")) == (
            PREFIX
            + "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)"
        )
        assert config_error(values_with(observer={"maxSamples": 0}, role="")) == (
            PREFIX + "routing.observer.maxSamples must be positive when routing is enabled"
        )

    def test_with_routing_off_only_the_duration_syntax_is_judged(self) -> None:
        """OME's duration check runs with routing off; the routing rules do not."""
        rules_broken = values_with(
            capacity=a_poll(timeout="10s", samples=0),
            observer={"maxSamples": 0},
            routing_enabled=False,
        )
        config = config_from_values(rules_broken)
        assert not config.routing_active
        assert config.capacity is None
        syntax_broken = values_with(capacity=a_poll(period="10"), routing_enabled=False)
        assert config_error(syntax_broken) == (
            PREFIX + 'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")'
        )

    def test_missing_gates_default_to_off(self) -> None:
        assert config_from_values({"ome": {"multicluster": {"config": {"routing": {}}}}}) == (
            OperatorConfig()
        )

    @pytest.mark.parametrize(
        ("gate", "value", "message"),
        [
            ("enabled", "true", 'multicluster.enabled must be true or false, got "true"'),
            ("enabled", 1, "multicluster.enabled must be true or false, got 1"),
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

    def test_a_routing_switch_of_the_wrong_type_fails_to_load(self) -> None:
        assert config_error(values_with(routing_enabled="yes")) == (
            LOAD + 'routing.enabled must be true or false, got "yes"'
        )

    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ({"ome": []}, PREFIX + "ome must be a mapping of fields, got []"),
            (
                {"ome": {"multicluster": "on"}},
                PREFIX + 'ome.multicluster must be a mapping of fields, got "on"',
            ),
            (
                {"ome": {"multicluster": {"enabled": True, "config": 1}}},
                LOAD + "config must be a mapping of fields, got 1",
            ),
            (
                {"ome": {"multicluster": {"enabled": True, "config": {"routing": True}}}},
                LOAD + "routing must be a mapping of fields, got true",
            ),
        ],
    )
    def test_blocks_of_the_wrong_shape_are_named(
        self, values: dict[str, Any], message: str
    ) -> None:
        assert config_error(values) == message

    def test_a_block_of_the_wrong_shape_is_not_read_while_multicluster_is_off(self) -> None:
        assert config_from_values({"ome": {"multicluster": {"config": 1}}}) == OperatorConfig()

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
            config_from_values(values_with(observer={"maxSamples": 0}))
        assert isinstance(caught.value, ConfigError)
        assert caught.value.detail == (
            "routing.observer.maxSamples must be positive when routing is enabled"
        )
        assert str(caught.value) == PREFIX + caught.value.detail

    def test_probe_and_publisher_blocks_are_kept_raw(self) -> None:
        probe = {"path": "", "period": "5s"}
        publisher = {"name": "gatewayapi"}
        config = config_from_values(values_with(probe=probe, publisher=publisher))
        assert config.probe == probe
        assert config.publisher == publisher

    def test_probe_must_be_a_mapping(self) -> None:
        assert config_error(values_with(probe="on")) == (
            LOAD + 'routing.probe must be a mapping of fields, got "on"'
        )


# --- the observer limits -----------------------------------------------------------------

LIMITS = [
    "maxConcurrentReconciles",
    "maxConcurrentRequests",
    "maxResponseBytes",
    "minPeriod",
    "maxSamples",
]
COUNT_LIMITS = [limit for limit in LIMITS if limit != "minPeriod"]
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
        [(limit, value) for limit in COUNT_LIMITS for value in (0, None, -1)]
        + [("minPeriod", None), ("minPeriod", "")],
    )
    def test_a_limit_removed_or_not_positive_stops_the_controller(
        self, limit: str, value: Any
    ) -> None:
        assert config_error(values_with(observer={limit: value})) == (
            PREFIX + f"routing.observer.{limit} must be positive when routing is enabled"
        )

    @pytest.mark.parametrize(("value", "shown"), [("0s", '"0s"'), (0, '"0"'), ("-1s", '"-1s"')])
    def test_a_min_period_of_zero_or_less_fails_with_the_durations(
        self, value: Any, shown: str
    ) -> None:
        """OME's duration check refuses a set duration that is not positive, before the limits."""
        assert config_error(values_with(observer={"minPeriod": value})) == (
            PREFIX + f"routing.observer.minPeriod: {shown} must be positive"
        )

    def test_limits_are_required_even_without_a_poll_or_probe(self) -> None:
        values = values_with(observer={"maxConcurrentRequests": 0})
        assert "capacity" not in values["ome"]["multicluster"]["config"]["routing"]
        assert config_error(values) == (
            PREFIX
            + "routing.observer.maxConcurrentRequests must be positive when routing is enabled"
        )

    def test_the_first_limit_in_omes_order_is_reported(self) -> None:
        values = values_with(observer={"maxSamples": 0, "maxResponseBytes": 0})
        assert config_error(values) == (
            PREFIX + "routing.observer.maxResponseBytes must be positive when routing is enabled"
        )

    def test_a_null_observer_block_removes_every_limit(self) -> None:
        assert config_error(values_with(observer=None)) == (
            PREFIX
            + "routing.observer.maxConcurrentReconciles must be positive when routing is enabled"
        )

    @pytest.mark.parametrize("limit", COUNT_LIMITS)
    @pytest.mark.parametrize(
        ("value", "shown"), [("16", '"16"'), (2.5, "2.5"), (True, "true"), ([1], "[1]")]
    )
    def test_a_numeric_limit_of_the_wrong_type_is_named(
        self, limit: str, value: Any, shown: str
    ) -> None:
        assert config_error(values_with(observer={limit: value})) == (
            LOAD + f"routing.observer.{limit} must be a whole number, got {shown}"
        )

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            (1, 'routing.observer.minPeriod: "1" is not a duration (use forms like "30s", "5m")'),
            (
                "1 s",
                'routing.observer.minPeriod: "1 s" is not a duration (use forms like "30s", "5m")',
            ),
            (
                "true",
                'routing.observer.minPeriod: "true" is not a duration (use forms like "30s", "5m")',
            ),
        ],
    )
    def test_min_period_must_be_a_duration(self, value: Any, message: str) -> None:
        assert config_error(values_with(observer={"minPeriod": value})) == PREFIX + message

    def test_a_min_period_of_the_wrong_type_fails_to_load(self) -> None:
        assert config_error(values_with(observer={"minPeriod": True})) == (
            LOAD + 'routing.observer.minPeriod must be a duration such as "10s", got true'
        )

    def test_observer_must_be_a_mapping(self) -> None:
        assert config_error(values_with(observer=[8])) == (
            LOAD + "routing.observer must be a mapping of fields, got [8]"
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
        values = values_with(capacity=a_poll(samples=8), observer={"maxSamples": 7})
        assert config_error(values) == (
            PREFIX + "routing.capacity.samples (8) must not exceed routing.observer.maxSamples (7)"
        )

    def test_the_poll_is_judged_before_the_limits_it_must_fit(self) -> None:
        values = values_with(capacity=a_poll(samples=200, quorum=300))
        assert config_error(values) == (
            PREFIX + "routing.capacity.quorum (300) must not exceed routing.capacity.samples (200)"
        )


# --- the chart's poll ----------------------------------------------------------------------

WHEN = "when routing.capacity.path is set"


class TestChartPoll:
    @pytest.mark.parametrize("capacity", [None, {}, {"path": None}, {"path": ""}])
    def test_no_block_or_no_path_means_no_chart_poll(self, capacity: Any) -> None:
        config = config_from_values(values_with(capacity=capacity))
        assert config.routing_active
        assert config.capacity is None

    def test_a_block_without_a_path_is_off_whatever_else_it_sets(self) -> None:
        """OME: an empty path turns the poll off, and its other fields are not judged."""
        capacity = {"samples": 0, "quorum": 50, "period": "10s", "timeout": "1m", "method": "PUT"}
        config = config_from_values(values_with(capacity=capacity))
        assert config.capacity is None
        assert config.warnings == ()

    def test_a_block_without_a_path_still_has_its_durations_checked(self) -> None:
        assert config_error(values_with(capacity={"period": "10"})) == (
            PREFIX + 'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")'
        )

    @pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
    def test_every_method_omes_accepts_is_accepted(self, method: str) -> None:
        policy = config_from_values(values_with(capacity=a_poll(method=method))).capacity
        assert policy is not None
        assert policy.method == method

    @pytest.mark.parametrize("drop", [DROP, None, ""])
    @pytest.mark.parametrize("missing", ["method", "format"])
    def test_a_missing_method_or_format_is_required(self, missing: str, drop: Any) -> None:
        assert config_error(values_with(capacity=a_poll(**{missing: drop}))) == (
            PREFIX + f"routing.capacity.{missing} is required {WHEN}"
        )

    @pytest.mark.parametrize(
        ("missing", "drop"),
        [(name, drop) for name in ("period", "timeout", "maxAge") for drop in (DROP, None, "")]
        + [(name, drop) for name in ("samples", "quorum") for drop in (DROP, None, 0)],
    )
    def test_a_missing_or_zero_field_must_be_positive(self, missing: str, drop: Any) -> None:
        """A duration of 0 is refused earlier, with the durations (see the rules table)."""
        assert config_error(values_with(capacity=a_poll(**{missing: drop}))) == (
            PREFIX + f"routing.capacity.{missing} must be positive {WHEN}"
        )

    def test_options_may_be_left_out_or_empty(self) -> None:
        assert config_from_values(values_with(capacity=a_poll(options={}))).capacity == (
            config_from_values(values_with(capacity=a_poll())).capacity
        )

    def test_durations_print_as_go_prints_them(self) -> None:
        values = values_with(capacity=a_poll(period="90s", timeout="1m30s", maxAge="5m"))
        assert config_error(values) == (
            PREFIX
            + "routing.capacity.timeout (1m30s) must be shorter than routing.capacity.period (1m30s)"
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


#: (id, overrides, message): OME's chart rules, each broken alone.
CHART_RULES: list[tuple[str, dict[str, Any], str]] = [
    ("path-relative", {"path": "capacity"}, 'routing.capacity.path "capacity" must begin with "/"'),
    ("path-url", {"path": "http://x/c"}, 'routing.capacity.path "http://x/c" must begin with "/"'),
    (
        "path-control",
        {"path": "c\x01"},
        'routing.capacity.path "c\\x01" must begin with "/"',
    ),
    ("method-lower", {"method": "get"}, 'routing.capacity.method "get" must be GET, HEAD, or POST'),
    ("method-put", {"method": "PUT"}, 'routing.capacity.method "PUT" must be GET, HEAD, or POST'),
    (
        "format-unknown",
        {"format": "report"},
        'routing.capacity.format "report" is not registered in this build (available: [Report])',
    ),
    (
        "options-report",
        {"options": {"field": "ready"}},
        'routing.capacity.options is not accepted for format "Report"',
    ),
    ("samples-neg", {"samples": -3}, f"routing.capacity.samples must be positive {WHEN}"),
    ("quorum-neg", {"quorum": -1}, f"routing.capacity.quorum must be positive {WHEN}"),
    (
        "quorum-over-samples",
        {"samples": 4, "quorum": 5, "maxAge": "60s"},
        "routing.capacity.quorum (5) must not exceed routing.capacity.samples (4)",
    ),
    (
        "samples-over-max",
        {"samples": 200},
        "routing.capacity.samples (200) must not exceed routing.observer.maxSamples (100)",
    ),
    (
        "period-min",
        {"period": "500ms", "timeout": "100ms", "maxAge": "5s"},
        "routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
    ),
    ("period-zero", {"period": "0s"}, 'routing.capacity.period: "0s" must be positive'),
    ("period-zero-int", {"period": 0}, 'routing.capacity.period: "0" must be positive'),
    ("period-neg", {"period": "-10s"}, 'routing.capacity.period: "-10s" must be positive'),
    ("timeout-zero", {"timeout": "0"}, 'routing.capacity.timeout: "0" must be positive'),
    ("max-age-zero", {"maxAge": "0s"}, 'routing.capacity.maxAge: "0s" must be positive'),
    (
        "timeout-equal",
        {"timeout": "10s"},
        "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)",
    ),
    (
        "timeout-longer",
        {"timeout": "1m"},
        "routing.capacity.timeout (1m0s) must be shorter than routing.capacity.period (10s)",
    ),
    (
        "max-age-span",
        {"quorum": 3, "maxAge": "20s"},
        "routing.capacity.maxAge (20s) must span at least quorum (3) routing.capacity.period "
        "intervals",
    ),
    (
        "max-age-span-whole-periods",
        {"quorum": 2, "maxAge": "19.999s"},
        "routing.capacity.maxAge (19.999s) must span at least quorum (2) routing.capacity.period "
        "intervals",
    ),
    (
        "max-age-span-before-period",
        {"quorum": 3, "maxAge": "5s"},
        "routing.capacity.maxAge (5s) must span at least quorum (3) routing.capacity.period "
        "intervals",
    ),
    (
        "max-age-under-period-quorum-1",
        {"quorum": 1, "maxAge": "5s"},
        "routing.capacity.maxAge (5s) must be at least routing.capacity.period (10s)",
    ),
    (
        "options-empty-is-none",
        {"options": {}, "format": "report"},
        'routing.capacity.format "report" is not registered in this build (available: [Report])',
    ),
]
#: (id, overrides, message): values of a type OME cannot decode.
CHART_SHAPES: list[tuple[str, dict[str, Any], str]] = [
    ("path-type", {"path": 5}, "routing.capacity.path must be a string, got 5"),
    ("method-type", {"method": ["GET"]}, 'routing.capacity.method must be a string, got ["GET"]'),
    ("format-type", {"format": 1}, "routing.capacity.format must be a string, got 1"),
    (
        "options-type",
        {"options": ["a"]},
        'routing.capacity.options must be a mapping of fields, got ["a"]',
    ),
    (
        "options-value",
        {"options": {"a": 1}},
        'routing.capacity.options["a"] must be a string, got 1',
    ),
    (
        "samples-text",
        {"samples": "10"},
        'routing.capacity.samples must be a whole number, got "10"',
    ),
    ("samples-float", {"samples": 2.5}, "routing.capacity.samples must be a whole number, got 2.5"),
    ("quorum-text", {"quorum": "2"}, 'routing.capacity.quorum must be a whole number, got "2"'),
]
for _name in ["period", "timeout", "maxAge"]:
    for _bad, _shown in [
        ("10", '"10"'),
        (10, '"10"'),
        ("ten seconds", '"ten seconds"'),
        ("1d", '"1d"'),
        ("10 s", '"10 s"'),
        (1.5, '"1.5"'),
    ]:
        CHART_RULES.append(
            (
                f"{_name}-not-duration-{_bad!r}",
                {_name: _bad},
                f'routing.capacity.{_name}: {_shown} is not a duration (use forms like "30s", "5m")',
            )
        )
    for _bad, _shown in [(True, "true"), ([1], "[1]"), ({"s": 1}, '{"s": 1}')]:
        CHART_SHAPES.append(
            (
                f"{_name}-type-{_shown}",
                {_name: _bad},
                f'routing.capacity.{_name} must be a duration such as "10s", got {_shown}',
            )
        )


class TestChartPollRules:
    @pytest.mark.parametrize(
        ("overrides", "message"), [pytest.param(o, m, id=i) for i, o, m in CHART_RULES]
    )
    def test_the_chart_poll_breaks_the_rule_at_startup(
        self, overrides: dict[str, Any], message: str
    ) -> None:
        assert config_error(values_with(capacity=a_poll(**overrides))) == PREFIX + message

    @pytest.mark.parametrize(
        ("overrides", "message"), [pytest.param(o, m, id=i) for i, o, m in CHART_SHAPES]
    )
    def test_a_value_of_the_wrong_type_fails_to_load(
        self, overrides: dict[str, Any], message: str
    ) -> None:
        assert config_error(values_with(capacity=a_poll(**overrides))) == LOAD + message


# --- which error wins ------------------------------------------------------------------------


class TestWhichErrorWins:
    """Every row of OME's table, then the orders it implies."""

    def test_a_relative_path_wins_over_a_missing_method(self) -> None:
        values = values_with(capacity=a_poll(path="x", method=DROP))
        assert config_error(values) == PREFIX + 'routing.capacity.path "x" must begin with "/"'

    def test_the_timeout_rule_comes_before_the_quorum_rule(self) -> None:
        values = values_with(capacity=a_poll(quorum=11, samples=10, timeout="10s"))
        assert config_error(values) == (
            PREFIX
            + "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)"
        )

    def test_a_duration_syntax_error_comes_before_the_observer_limits(self) -> None:
        values = values_with(capacity=a_poll(period="10"), observer={"maxSamples": 0})
        assert config_error(values) == (
            PREFIX + 'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")'
        )

    def test_a_missing_format_comes_before_a_bad_method(self) -> None:
        values = values_with(capacity=a_poll(method="PUT", format=""))
        assert config_error(values) == PREFIX + f"routing.capacity.format is required {WHEN}"

    def test_duration_errors_are_joined_in_byte_order_of_their_keys(self) -> None:
        values = values_with(capacity=a_poll(maxAge="x", period="y"))
        assert config_error(values) == (
            PREFIX + 'routing.capacity.maxAge: "x" is not a duration (use forms like "30s", "5m")\n'
            'routing.capacity.period: "y" is not a duration (use forms like "30s", "5m")'
        )

    def test_every_duration_of_every_block_is_reported_together(self) -> None:
        values = values_with(
            capacity=a_poll(timeout="-1s", period="10"),
            observer={"minPeriod": "1x"},
            probe={"period": "5", "timeout": "0s"},
            publisher={"resyncInterval": "soon"},
        )
        failure = config_failure(values)
        assert failure.detail.splitlines() == [
            'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")',
            'routing.capacity.timeout: "-1s" must be positive',
            'routing.observer.minPeriod: "1x" is not a duration (use forms like "30s", "5m")',
            'routing.probe.period: "5" is not a duration (use forms like "30s", "5m")',
            'routing.probe.timeout: "0s" must be positive',
            'routing.publisher.resyncInterval: "soon" is not a duration (use forms like "30s", "5m")',
        ]
        assert str(failure).count(PREFIX) == 1

    def test_the_observer_limits_come_before_the_poll(self) -> None:
        values = values_with(capacity=a_poll(timeout="10s"), observer={"maxSamples": 0})
        assert config_error(values) == (
            PREFIX + "routing.observer.maxSamples must be positive when routing is enabled"
        )

    def test_a_type_error_comes_before_the_durations(self) -> None:
        values = values_with(capacity=a_poll(period="10", samples="10"))
        assert config_error(values) == (
            LOAD + 'routing.capacity.samples must be a whole number, got "10"'
        )

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            ({"path": "x", "timeout": "1m"}, 'routing.capacity.path "x" must begin with "/"'),
            ({"method": DROP, "format": DROP}, f"routing.capacity.method is required {WHEN}"),
            (
                {"format": "report", "maxAge": "1s"},
                "routing.capacity.maxAge (1s) must span at least quorum (2) "
                "routing.capacity.period intervals",
            ),
            (
                {"format": "report", "options": {"a": "b"}},
                'routing.capacity.format "report" is not registered in this build '
                "(available: [Report])",
            ),
            (
                {"samples": 0, "quorum": 0, "maxAge": DROP},
                f"routing.capacity.maxAge must be positive {WHEN}",
            ),
            ({"samples": DROP, "quorum": 0}, f"routing.capacity.samples must be positive {WHEN}"),
        ],
        ids=[
            "path-first",
            "method-before-format",
            "span-before-format",
            "format-first",
            "max-age-before-samples",
            "samples-before-quorum",
        ],
    )
    def test_the_first_rule_in_omes_order_wins(
        self, overrides: dict[str, Any], message: str
    ) -> None:
        assert config_error(values_with(capacity=a_poll(**overrides))) == PREFIX + message


# --- the publisher's resync ------------------------------------------------------------------


class TestResyncInterval:
    def test_left_out_it_keeps_the_charts_default_of_one_minute(self) -> None:
        assert config_from_values(values_with()).resync_interval == Duration.parse("1m")

    def test_a_set_interval_is_kept(self) -> None:
        config = config_from_values(values_with(publisher={"resyncInterval": "30s"}))
        assert config.resync_interval == Duration.parse("30s")

    @pytest.mark.parametrize("value", ["", None])
    def test_removed_while_routing_is_on_it_stops_the_controller(self, value: Any) -> None:
        assert config_error(values_with(publisher={"resyncInterval": value})) == (
            PREFIX + "routing.publisher.resyncInterval: must be positive when routing is enabled"
        )

    @pytest.mark.parametrize(
        ("value", "routing_enabled"), [("0s", True), ("-1m", True), ("-1m", False)]
    )
    def test_zero_while_routing_is_on_or_negative_stops_the_controller(
        self, value: str, routing_enabled: bool
    ) -> None:
        values = values_with(publisher={"resyncInterval": value}, routing_enabled=routing_enabled)
        assert config_error(values) == (
            PREFIX + f'routing.publisher.resyncInterval: "{value}" must be positive when '
            "routing is enabled and non-negative otherwise"
        )

    @pytest.mark.parametrize("value", ["", None, "0s"])
    def test_with_routing_off_an_empty_or_zero_interval_is_allowed(self, value: Any) -> None:
        values = values_with(publisher={"resyncInterval": value}, routing_enabled=False)
        assert config_from_values(values).resync_interval == Duration(0)

    @pytest.mark.parametrize("value", ["1", 60, "a minute"])
    def test_an_interval_that_is_not_a_duration_is_named(self, value: Any) -> None:
        assert config_error(values_with(publisher={"resyncInterval": value})) == (
            PREFIX + f'routing.publisher.resyncInterval: "{value}" is not a duration '
            '(use forms like "30s", "5m")'
        )

    def test_it_is_reported_after_the_other_durations(self) -> None:
        values = values_with(capacity=a_poll(period="x"), publisher={"resyncInterval": ""})
        assert config_failure(values).detail.splitlines() == [
            'routing.capacity.period: "x" is not a duration (use forms like "30s", "5m")',
            "routing.publisher.resyncInterval: must be positive when routing is enabled",
        ]


# --- unknown keys ------------------------------------------------------------------------------

CAPACITY_KEYS = "path, method, format, options, samples, quorum, period, timeout, maxAge"


class TestUnknownKeys:
    def test_a_misspelled_poll_field_is_a_warning_naming_it(self) -> None:
        config = config_from_values(values_with(capacity=a_poll(peroid="20s")))
        assert config.capacity is not None
        assert config.warnings == (
            "unknown multi-cluster setting routing.capacity.peroid is ignored "
            f"(known: {CAPACITY_KEYS})",
        )

    def test_the_warnings_travel_with_the_error_they_explain(self) -> None:
        """`peroid` for `period`: the poll has no period, and the warning says why."""
        failure = config_failure(values_with(capacity=a_poll(period=DROP, peroid="10s")))
        assert str(failure) == PREFIX + f"routing.capacity.period must be positive {WHEN}"
        assert failure.warnings == (
            "unknown multi-cluster setting routing.capacity.peroid is ignored "
            f"(known: {CAPACITY_KEYS})",
        )

    @pytest.mark.parametrize(
        ("values", "warning"),
        [
            (
                values_with(observer={"maxSample": 5}),
                "routing.observer.maxSample is ignored (known: maxConcurrentReconciles, "
                "maxConcurrentRequests, maxResponseBytes, minPeriod, maxSamples, "
                "caBundleFile, clientCertFile, clientKeyFile, bearerTokenFile, allowCIDRs, "
                "denyCIDRs)",
            ),
            (
                values_with(capacity={"disabled": True}),
                f"routing.capacity.disabled is ignored (known: {CAPACITY_KEYS})",
            ),
            (
                values_with(publisher={"resync": "1m"}),
                "routing.publisher.resync is ignored (known: name, resyncInterval, options)",
            ),
            (
                values_with(probe={"paht": "/healthz"}),
                "routing.probe.paht is ignored (known: path, method, acceptStatuses, "
                "gateStatuses, period, timeout, failureThreshold, successThreshold, "
                "allFailedPolicy)",
            ),
            (
                values_with(capacityy={}),
                "routing.capacityy is ignored (known: enabled, observer, probe, capacity, "
                "publisher)",
            ),
            (
                {"ome": {"multicluster": {"enabled": True, "config": {"routng": {}}}}},
                "routng is ignored (known: workloadCluster, placement, endpoint, routing)",
            ),
            (
                {"ome": {"multicluster": {"enabled": True, "rol": "control-plane"}}},
                "multicluster.rol is ignored (known: enabled, role, config)",
            ),
        ],
        ids=["observer", "capacity", "publisher", "probe", "routing", "config", "multicluster"],
    )
    def test_every_level_names_its_unknown_keys(self, values: dict[str, Any], warning: str) -> None:
        assert config_from_values(values).warnings == ("unknown multi-cluster setting " + warning,)

    def test_omes_other_sections_are_known(self) -> None:
        values = values_with()
        values["ome"]["multicluster"]["config"].update(
            {"workloadCluster": {}, "placement": {}, "endpoint": {}}
        )
        assert config_from_values(values).warnings == ()

    def test_the_spec_values_file_has_no_warnings(self) -> None:
        assert config_from_values(step1_values()).warnings == ()


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
        method=draw(st.sampled_from(["GET", "HEAD", "POST"])),
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
        expected = (
            f"routing.capacity.maxAge ({max_age}) must span at least quorum ({quorum}) "
            "routing.capacity.period intervals"
            if quorum > 1
            else f"routing.capacity.maxAge ({max_age}) must be at least "
            f"routing.capacity.period ({Duration(period_ns)})"
        )
        assert config_error(values_with(capacity=poll)) == PREFIX + expected

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
