"""One InferenceService's `spec.routing`, resolved against the chart.

Where a service's poll comes from; OME's per-service rules and their order
(`validate routing policy:`), then resolution against the build and the chart
(`resolve capacity policy:`); capacity factors and publisher options.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DROP, with_overrides
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.config import OperatorConfig, config_from_values
from ome_routing.core.durations import Duration
from ome_routing.core.policy import (
    PolicyError,
    PollMode,
    RoutingPolicy,
    resolve_routing_policy,
)
from ome_routing.core.pollrules import CapacityPolicy, ObserverLimits, RuleStage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VALIDATE = "validate routing policy: "
RESOLVE = "resolve capacity policy: "
F = "spec.routing.capacity"
#: What OME's controller says when an enabled poll leaves a field out (or sets it to zero).
MISSING = {
    "path": f"{F}.path is required",
    "method": f"{F}.method is required",
    "format": f"{F}.format is required",
    "period": f"{F}.period must be positive",
    "timeout": f"{F}.timeout must be positive",
    "samples": f"{F}.samples must be positive",
    "quorum": f"{F}.quorum must be positive",
    "maxAge": f"{F}.maxAge must be positive",
}
REQUIRED = list(MISSING)


# --- builders -------------------------------------------------------------------------


def a_poll(**overrides: Any) -> dict[str, Any]:
    """The spec's Step 2 poll, with overrides; `DROP` removes a field."""
    return with_overrides(
        {
            "path": "/capacity",
            "method": "GET",
            "format": "Report",
            "samples": 4,
            "quorum": 3,
            "period": "10s",
            "timeout": "3s",
            "maxAge": "40s",
        },
        overrides,
    )


def chart(capacity: dict[str, Any] | None = None, **observer: Any) -> OperatorConfig:
    """An operator config with routing on, the given chart poll and observer limits."""
    routing: dict[str, Any] = {"enabled": True}
    if capacity is not None:
        routing["capacity"] = capacity
    if observer:
        routing["observer"] = observer
    return config_from_values(
        {
            "ome": {
                "multicluster": {
                    "enabled": True,
                    "role": "control-plane",
                    "config": {"routing": routing},
                }
            }
        }
    )


CHART_POLL = {
    "path": "/chart-capacity",
    "method": "POST",
    "format": "Report",
    "samples": 10,
    "quorum": 2,
    "period": "10s",
    "timeout": "3s",
    "maxAge": "30s",
}


def policy_error(routing: Any, config: OperatorConfig | None = None) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        resolve_routing_policy(routing, config or chart())
    return caught.value


def step2_routing() -> dict[str, Any]:
    manifest = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    routing = manifest["spec"]["routing"]
    assert isinstance(routing, dict)
    return routing


# --- the spec's examples ----------------------------------------------------------------


class TestSpecExamples:
    def test_step2_poll_resolves_as_written(self) -> None:
        policy = resolve_routing_policy(step2_routing(), chart(CHART_POLL))
        assert policy.poll_mode is PollMode.SERVICE
        assert policy.capacity == CapacityPolicy(
            path="/capacity",
            method="GET",
            format="Report",
            samples=4,
            quorum=3,
            period=Duration.parse("10s"),
            timeout=Duration.parse("3s"),
            max_age=Duration.parse("40s"),
        )

    @pytest.mark.parametrize(
        ("poll", "message"),
        [
            (
                a_poll(maxAge="20s"),
                VALIDATE
                + "spec.routing.capacity.maxAge (20s) must span at least quorum (3) period intervals",
            ),
            (
                a_poll(format="report"),
                RESOLVE + 'spec.routing.capacity.format "report" is not registered in this build '
                "(available: [Report])",
            ),
            (
                a_poll(period="500ms", timeout="100ms", maxAge="2s"),
                RESOLVE
                + "spec.routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
            ),
            (
                a_poll(samples=200),
                RESOLVE
                + "spec.routing.capacity.samples (200) must not exceed routing.observer.maxSamples (100)",
            ),
        ],
        ids=["max-age", "format", "min-period", "max-samples"],
    )
    def test_troubleshooting_table_messages_read_word_for_word(
        self, poll: dict[str, Any], message: str
    ) -> None:
        error = policy_error({"capacity": poll})
        assert str(error) == message

    @pytest.mark.parametrize("config", [OperatorConfig(), chart(CHART_POLL)])
    def test_disabled_turns_the_poll_off_whatever_the_chart_sets(
        self, config: OperatorConfig
    ) -> None:
        policy = resolve_routing_policy({"capacity": {"disabled": True}}, config)
        assert policy.poll_mode is PollMode.DISABLED
        assert policy.capacity is None
        assert policy.enabled


# --- where the poll comes from ----------------------------------------------------------


class TestPollMode:
    @pytest.mark.parametrize("routing", [None, {}, {"capacity": None}])
    def test_without_a_service_poll_the_chart_poll_applies(self, routing: Any) -> None:
        config = chart(CHART_POLL)
        policy = resolve_routing_policy(routing, config)
        assert policy.poll_mode is PollMode.CHART
        assert policy.capacity == config.capacity
        assert policy.enabled

    @pytest.mark.parametrize("routing", [None, {}, {"capacityFactors": {"worker-b": "3"}}])
    def test_without_either_poll_there_is_none(self, routing: Any) -> None:
        policy = resolve_routing_policy(routing, chart())
        assert policy.poll_mode is PollMode.NOT_CONFIGURED
        assert policy.capacity is None

    def test_a_service_poll_without_a_chart_poll_applies(self) -> None:
        policy = resolve_routing_policy({"capacity": a_poll()}, chart())
        assert policy.poll_mode is PollMode.SERVICE
        assert policy.capacity is not None
        assert policy.capacity.samples == 4

    def test_a_service_poll_replaces_the_chart_poll_as_a_whole(self) -> None:
        policy = resolve_routing_policy({"capacity": a_poll()}, chart(CHART_POLL))
        assert policy.capacity is not None
        assert (policy.capacity.path, policy.capacity.method, policy.capacity.samples) == (
            "/capacity",
            "GET",
            4,
        )

    @pytest.mark.parametrize("missing", REQUIRED)
    def test_a_missing_field_is_not_taken_from_the_chart(self, missing: str) -> None:
        error = policy_error({"capacity": a_poll(**{missing: DROP})}, chart(CHART_POLL))
        assert str(error) == VALIDATE + MISSING[missing]
        assert error.stage is RuleStage.VALIDATE

    def test_disabled_false_with_a_complete_poll_polls(self) -> None:
        policy = resolve_routing_policy({"capacity": {**a_poll(), "disabled": False}}, chart())
        assert policy.poll_mode is PollMode.SERVICE

    def test_every_poll_mode_is_reachable(self) -> None:
        reached = {
            resolve_routing_policy(routing, config).poll_mode
            for routing, config in [
                ({"capacity": a_poll()}, chart()),
                (None, chart(CHART_POLL)),
                ({"capacity": {"disabled": True}}, chart()),
                (None, chart()),
            ]
        }
        assert reached == set(PollMode)


# --- completeness and disabled ------------------------------------------------------------


class TestCompleteness:
    @pytest.mark.parametrize("missing", REQUIRED)
    def test_an_enabled_poll_without_a_field_names_it_as_ome_does(self, missing: str) -> None:
        assert str(policy_error({"capacity": a_poll(**{missing: DROP})})) == (
            VALIDATE + MISSING[missing]
        )

    @pytest.mark.parametrize("missing", REQUIRED)
    def test_a_null_field_counts_as_missing(self, missing: str) -> None:
        assert str(policy_error({"capacity": a_poll(**{missing: None})})) == (
            VALIDATE + MISSING[missing]
        )

    @pytest.mark.parametrize(
        ("field", "zero"),
        [("path", ""), ("method", ""), ("format", ""), ("samples", 0), ("quorum", 0)]
        + [(name, "0s") for name in ("period", "timeout", "maxAge")],
    )
    def test_a_zero_value_counts_as_unset(self, field: str, zero: Any) -> None:
        assert str(policy_error({"capacity": a_poll(**{field: zero})})) == (
            VALIDATE + MISSING[field]
        )

    @pytest.mark.parametrize("capacity", [{}, {"disabled": False}, {"disabled": None}])
    def test_an_empty_or_undisabled_block_needs_a_path_first(
        self, capacity: dict[str, Any]
    ) -> None:
        assert str(policy_error({"capacity": capacity})) == VALIDATE + MISSING["path"]

    def test_options_may_be_left_out(self) -> None:
        policy = resolve_routing_policy({"capacity": a_poll(options={})}, chart())
        assert policy.capacity is not None
        assert policy.capacity.options == ()

    @pytest.mark.parametrize(
        "extra",
        [
            {"path": "/capacity"},
            {"samples": 4, "quorum": 3},
            {"options": {"a": "b"}},
            {"maxAge": "1s"},
            {"method": "PUT"},
        ],
    )
    def test_disabled_cannot_be_combined_with_poll_fields(self, extra: dict[str, Any]) -> None:
        error = policy_error({"capacity": {"disabled": True, **extra}})
        assert str(error) == (
            VALIDATE + f"{F}.disabled must not be combined with capacity configuration fields"
        )

    @pytest.mark.parametrize(
        "zeros", [{"samples": 0}, {"options": {}}, {"path": ""}, {"period": "0s"}, {"quorum": None}]
    )
    def test_disabled_with_zero_values_is_still_disabled(self, zeros: dict[str, Any]) -> None:
        policy = resolve_routing_policy({"capacity": {"disabled": True, **zeros}}, chart())
        assert policy.poll_mode is PollMode.DISABLED

    def test_disabled_must_be_a_boolean(self) -> None:
        assert str(policy_error({"capacity": {"disabled": "true"}})) == (
            VALIDATE + 'spec.routing.capacity.disabled must be true or false, got "true"'
        )

    def test_unknown_poll_field_names_the_service_fields(self) -> None:
        assert str(policy_error({"capacity": a_poll(peroid="10s")})) == (
            VALIDATE + "spec.routing.capacity.peroid is not a known field (known: disabled, "
            "path, method, format, options, samples, quorum, period, timeout, maxAge)"
        )

    def test_capacity_must_be_a_mapping(self) -> None:
        assert str(policy_error({"capacity": "off"})) == (
            VALIDATE + 'spec.routing.capacity must be a mapping of fields, got "off"'
        )

    @pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
    def test_every_method_omes_accepts_is_accepted(self, method: str) -> None:
        policy = resolve_routing_policy({"capacity": a_poll(method=method)}, chart())
        assert policy.capacity is not None
        assert policy.capacity.method == method


#: (id, overrides, stage, message): OME's per-service rules, each broken alone.
SERVICE_RULES: list[tuple[str, dict[str, Any], RuleStage, str]] = [
    (
        "path-relative",
        {"path": "capacity"},
        RuleStage.VALIDATE,
        f'{F}.path "capacity" must begin with "/"',
    ),
    (
        "path-url",
        {"path": "http://x/c"},
        RuleStage.VALIDATE,
        f'{F}.path "http://x/c" must begin with "/"',
    ),
    (
        "method-lower",
        {"method": "get"},
        RuleStage.VALIDATE,
        f'{F}.method "get" must be GET, HEAD, or POST',
    ),
    (
        "method-put",
        {"method": "PUT"},
        RuleStage.VALIDATE,
        f'{F}.method "PUT" must be GET, HEAD, or POST',
    ),
    ("period-neg", {"period": "-10s"}, RuleStage.VALIDATE, f"{F}.period must be positive"),
    ("timeout-neg", {"timeout": "-1s"}, RuleStage.VALIDATE, f"{F}.timeout must be positive"),
    (
        "timeout-equal",
        {"timeout": "10s"},
        RuleStage.VALIDATE,
        f"{F}.timeout (10s) must be shorter than period (10s)",
    ),
    (
        "timeout-longer",
        {"timeout": "1m"},
        RuleStage.VALIDATE,
        f"{F}.timeout (1m0s) must be shorter than period (10s)",
    ),
    ("samples-neg", {"samples": -3}, RuleStage.VALIDATE, f"{F}.samples must be positive"),
    ("quorum-neg", {"quorum": -1}, RuleStage.VALIDATE, f"{F}.quorum must be positive"),
    (
        "quorum-over-samples",
        {"samples": 2, "quorum": 3},
        RuleStage.VALIDATE,
        f"{F}.quorum (3) must not exceed samples (2)",
    ),
    ("max-age-neg", {"maxAge": "-1s"}, RuleStage.VALIDATE, f"{F}.maxAge must be positive"),
    (
        "max-age-under-period",
        {"maxAge": "5s"},
        RuleStage.VALIDATE,
        f"{F}.maxAge (5s) must be at least period (10s)",
    ),
    (
        "max-age-span",
        {"maxAge": "20s"},
        RuleStage.VALIDATE,
        f"{F}.maxAge (20s) must span at least quorum (3) period intervals",
    ),
    (
        "max-age-span-whole-periods",
        {"maxAge": "29.999s"},
        RuleStage.VALIDATE,
        f"{F}.maxAge (29.999s) must span at least quorum (3) period intervals",
    ),
    (
        "format-unknown",
        {"format": "Prometheus"},
        RuleStage.RESOLVE,
        f'{F}.format "Prometheus" is not registered in this build (available: [Report])',
    ),
    (
        "options-report",
        {"options": {"field": "ready"}},
        RuleStage.RESOLVE,
        f'{F}.options is not accepted for format "Report"',
    ),
    (
        "period-min",
        {"period": "500ms", "timeout": "100ms", "maxAge": "2s"},
        RuleStage.RESOLVE,
        f"{F}.period (500ms) must be at least routing.observer.minPeriod (1s)",
    ),
    (
        "samples-max",
        {"samples": 101},
        RuleStage.RESOLVE,
        f"{F}.samples (101) must not exceed routing.observer.maxSamples (100)",
    ),
    # shapes the API server's schema refuses before OME sees them
    ("path-type", {"path": 5}, RuleStage.VALIDATE, f"{F}.path must be a string, got 5"),
    (
        "options-value",
        {"options": {"a": 1}},
        RuleStage.VALIDATE,
        f'{F}.options["a"] must be a string, got 1',
    ),
    (
        "samples-text",
        {"samples": "4"},
        RuleStage.VALIDATE,
        f'{F}.samples must be a whole number, got "4"',
    ),
    (
        "period-not-duration",
        {"period": "10"},
        RuleStage.VALIDATE,
        f'{F}.period: "10" is not a duration (use forms like "30s", "5m")',
    ),
    (
        "max-age-type",
        {"maxAge": True},
        RuleStage.VALIDATE,
        f'{F}.maxAge must be a duration such as "10s", got true',
    ),
]


class TestServicePollRules:
    @pytest.mark.parametrize(
        ("overrides", "stage", "message"),
        [pytest.param(o, st_, m, id=i) for i, o, st_, m in SERVICE_RULES],
    )
    def test_a_service_poll_breaks_the_rule_with_omes_words(
        self, overrides: dict[str, Any], stage: RuleStage, message: str
    ) -> None:
        error = policy_error({"capacity": a_poll(**overrides)}, OperatorConfig())
        assert error.stage is stage
        assert (
            str(error)
            == {RuleStage.VALIDATE: VALIDATE, RuleStage.RESOLVE: RESOLVE}[stage] + message
        )


# --- the chart's limits bound a service's poll --------------------------------------------


class TestObserverBounds:
    def test_the_chart_min_period_bounds_a_service_poll(self) -> None:
        config = chart(minPeriod="15s")
        assert str(policy_error({"capacity": a_poll(maxAge="1m")}, config)) == (
            RESOLVE
            + "spec.routing.capacity.period (10s) must be at least routing.observer.minPeriod (15s)"
        )

    def test_the_chart_max_samples_bounds_a_service_poll(self) -> None:
        config = chart(maxSamples=3)
        assert str(policy_error({"capacity": a_poll()}, config)) == (
            RESOLVE
            + "spec.routing.capacity.samples (4) must not exceed routing.observer.maxSamples (3)"
        )

    def test_raised_limits_admit_a_poll_the_defaults_refuse(self) -> None:
        poll = a_poll(samples=200, period="500ms", timeout="100ms", maxAge="2s")
        policy = resolve_routing_policy(
            {"capacity": poll}, chart(maxSamples=500, minPeriod="100ms")
        )
        assert policy.capacity is not None
        assert (policy.capacity.samples, str(policy.capacity.period)) == (200, "500ms")

    def test_a_poll_at_the_limits_exactly_is_accepted(self) -> None:
        poll = a_poll(samples=100, quorum=1, period="1s", timeout="999ms", maxAge="1s")
        assert resolve_routing_policy({"capacity": poll}, chart()).capacity is not None


# --- which error comes first -----------------------------------------------------------------


class TestErrorOrder:
    def test_an_intrinsic_rule_is_reported_before_the_format_registry(self) -> None:
        error = policy_error({"capacity": a_poll(format="report", maxAge="20s")})
        assert error.stage is RuleStage.VALIDATE
        assert str(error).startswith(VALIDATE + "spec.routing.capacity.maxAge (20s)")

    def test_a_bad_factor_is_reported_before_a_bound_of_the_chart(self) -> None:
        error = policy_error(
            {"capacity": a_poll(samples=200), "capacityFactors": {"worker-b": "0"}}
        )
        assert str(error) == (
            VALIDATE + 'spec.routing.capacityFactors["worker-b"] must be positive, got "0"'
        )

    def test_a_bad_factor_is_reported_before_a_broken_poll(self) -> None:
        error = policy_error({"capacity": a_poll(path="x"), "capacityFactors": {"worker-b": "-1"}})
        assert str(error) == (
            VALIDATE + 'spec.routing.capacityFactors["worker-b"] must be positive, got "-1"'
        )

    def test_the_poll_is_reported_before_the_publisher_options(self) -> None:
        routing = {"capacity": a_poll(timeout="10s"), "publisher": {"options": {"": "x"}}}
        assert str(policy_error(routing)) == (
            VALIDATE + f"{F}.timeout (10s) must be shorter than period (10s)"
        )

    def test_the_publisher_options_are_validated_before_the_poll_is_resolved(self) -> None:
        routing = {"capacity": a_poll(format="report"), "publisher": {"options": {" ": "x"}}}
        assert str(policy_error(routing)) == (
            VALIDATE + "spec.routing.publisher.options contains an empty or whitespace-only key"
        )

    def test_format_required_comes_after_the_method_for_a_service(self) -> None:
        """The reverse of the chart's order."""
        assert str(policy_error({"capacity": a_poll(method="PUT", format=DROP)})) == (
            VALIDATE + f'{F}.method "PUT" must be GET, HEAD, or POST'
        )

    def test_max_age_under_the_period_comes_before_the_span_for_a_service(self) -> None:
        """With quorum 3, period 10s, maxAge 5s: the chart names the span, a service the period."""
        assert str(policy_error({"capacity": a_poll(maxAge="5s")})) == (
            VALIDATE + f"{F}.maxAge (5s) must be at least period (10s)"
        )

    def test_the_format_registry_comes_before_the_observer_limits(self) -> None:
        error = policy_error({"capacity": a_poll(format="report", samples=200)})
        assert str(error) == (
            RESOLVE + f'{F}.format "report" is not registered in this build (available: [Report])'
        )

    def test_the_format_registry_comes_before_the_options(self) -> None:
        error = policy_error({"capacity": a_poll(format="report", options={"a": "b"})})
        assert str(error).startswith(RESOLVE + f'{F}.format "report" is not registered')

    def test_the_min_period_comes_before_max_samples(self) -> None:
        poll = a_poll(period="500ms", timeout="100ms", maxAge="2s", samples=200)
        assert str(policy_error({"capacity": poll})) == (
            RESOLVE + f"{F}.period (500ms) must be at least routing.observer.minPeriod (1s)"
        )

    def test_policy_error_is_a_value_error_with_its_stage_and_detail(self) -> None:
        error = policy_error({"capacity": a_poll(samples=200)})
        assert isinstance(error, ValueError)
        assert error.stage is RuleStage.RESOLVE
        assert str(error) == RESOLVE + error.detail


# --- capacity factors ----------------------------------------------------------------------


class TestCapacityFactors:
    @pytest.mark.parametrize(
        ("raw", "canonical"),
        [("3", "3"), ("1.5", "1500m"), ("500m", "500m"), ("0.5", "500m"), (3, "3"), ("2k", "2k")],
    )
    def test_positive_quantities_are_kept_exactly(self, raw: Any, canonical: str) -> None:
        policy = resolve_routing_policy({"capacityFactors": {"worker-b": raw}}, chart())
        assert str(policy.capacity_factors["worker-b"]) == canonical
        assert policy.capacity_factors["worker-b"].value > 0

    def test_clusters_without_a_factor_are_absent(self) -> None:
        policy = resolve_routing_policy({"capacityFactors": {"worker-b": "3"}}, chart())
        assert set(policy.capacity_factors) == {"worker-b"}
        assert resolve_routing_policy(None, chart()).capacity_factors == {}

    @pytest.mark.parametrize(
        ("raw", "shown"),
        [
            ("0", '"0"'),
            (0, '"0"'),
            ("-1", '"-1"'),
            ("-500m", '"-500m"'),
            ("0.0", '"0"'),
            ("-0.5", '"-500m"'),
            ("0e3", '"0"'),
        ],
    )
    def test_zero_or_negative_factors_are_refused_with_the_canonical_quantity(
        self, raw: Any, shown: str
    ) -> None:
        error = policy_error({"capacityFactors": {"worker-b": raw}})
        assert str(error) == (
            VALIDATE + f'spec.routing.capacityFactors["worker-b"] must be positive, got {shown}'
        )

    @pytest.mark.parametrize("raw", ["abc", "3x", "", "1.2.3", "one"])
    def test_unparsable_factors_are_named_with_their_text(self, raw: str) -> None:
        message = str(policy_error({"capacityFactors": {"worker-a": "1", "worker-b": raw}}))
        assert message.startswith(VALIDATE + 'spec.routing.capacityFactors["worker-b"]: quantity ')
        assert f'"{raw}"' in message

    @pytest.mark.parametrize(("raw", "shown"), [(True, "true"), ([3], "[3]"), (None, "null")])
    def test_factors_of_the_wrong_type_are_named(self, raw: Any, shown: str) -> None:
        assert str(policy_error({"capacityFactors": {"worker-b": raw}})) == (
            VALIDATE
            + f'spec.routing.capacityFactors["worker-b"] must be a quantity such as "1.5", got {shown}'
        )

    def test_factors_must_be_a_mapping(self) -> None:
        assert str(policy_error({"capacityFactors": ["worker-b"]})) == (
            VALIDATE + 'spec.routing.capacityFactors must be a mapping of fields, got ["worker-b"]'
        )

    def test_a_key_must_be_a_cluster_name(self) -> None:
        assert str(policy_error({"capacityFactors": {1: "3"}})) == (
            VALIDATE + "spec.routing.capacityFactors key 1 must be a WorkloadCluster name"
        )

    @settings(max_examples=100, deadline=None)
    @given(
        st.dictionaries(
            st.text("abcdefgh-0123", min_size=1, max_size=12),
            st.integers(1, 10**7),
            max_size=5,
        )
    )
    def test_any_positive_factor_keeps_its_exact_value(self, milli: dict[str, int]) -> None:
        raw = {name: f"{n // 1000}.{n % 1000:03d}" for name, n in milli.items()}
        policy = resolve_routing_policy({"capacityFactors": raw}, chart())
        assert {name: q.value for name, q in policy.capacity_factors.items()} == {
            name: Fraction(n, 1000) for name, n in milli.items()
        }


# --- enabled, probe, publisher, shape -----------------------------------------------------------


class TestRoutingBlock:
    def test_routing_is_enabled_by_default(self) -> None:
        assert resolve_routing_policy(None, chart()).enabled
        assert resolve_routing_policy({"enabled": True}, chart()).enabled

    def test_opting_out_is_not_held_back_by_a_broken_block(self) -> None:
        routing = {
            "enabled": False,
            "capacity": a_poll(maxAge="1s"),
            "capacityFactors": {"worker-b": "0"},
        }
        policy = resolve_routing_policy(routing, chart(CHART_POLL))
        assert policy == RoutingPolicy(
            enabled=False,
            capacity=None,
            poll_mode=PollMode.NOT_CONFIGURED,
            capacity_factors={},
            probe=None,
        )

    def test_enabled_must_be_a_boolean(self) -> None:
        assert str(policy_error({"enabled": "false"})) == (
            VALIDATE + 'spec.routing.enabled must be true or false, got "false"'
        )

    def test_probe_and_publisher_are_kept_raw(self) -> None:
        probe = {"disabled": True}
        publisher = {"options": {"a": "b"}}
        policy = resolve_routing_policy({"probe": probe, "publisher": publisher}, chart())
        assert policy.probe == probe
        assert policy.publisher == publisher

    def test_an_unknown_routing_field_is_named(self) -> None:
        assert str(policy_error({"capacityFactor": {"worker-b": "3"}})) == (
            VALIDATE + "spec.routing.capacityFactor is not a known field (known: enabled, "
            "capacityFactors, capacity, probe, publisher)"
        )

    def test_routing_must_be_a_mapping(self) -> None:
        assert str(policy_error(["capacity"])) == (
            VALIDATE + 'spec.routing must be a mapping of fields, got ["capacity"]'
        )

    def test_the_default_observer_limits_apply_without_a_chart(self) -> None:
        assert OperatorConfig().observer == ObserverLimits()
        assert str(policy_error({"capacity": a_poll(samples=101)}, OperatorConfig())) == (
            RESOLVE
            + "spec.routing.capacity.samples (101) must not exceed routing.observer.maxSamples (100)"
        )


# --- the deprecated placement factors: gone from OME, so neither read nor checked -------------


class TestDeprecatedFactors:
    @pytest.mark.parametrize("placement_factors", [{"worker-a": "2"}, {}, "x"])
    def test_placement_factors_beside_routing_factors_are_ignored(
        self, placement_factors: object
    ) -> None:
        policy = resolve_routing_policy(
            {"capacityFactors": {"worker-b": "3"}},
            chart(),
            {"policy": "ClusterAffinity", "capacityFactors": placement_factors},
        )
        assert {name: str(q) for name, q in policy.capacity_factors.items()} == {"worker-b": "3"}

    def test_placement_factors_alone_give_no_factors(self) -> None:
        policy = resolve_routing_policy(None, chart(), {"capacityFactors": {"worker-b": "3"}})
        assert dict(policy.capacity_factors) == {}

    def test_a_bad_routing_factor_is_still_reported(self) -> None:
        with pytest.raises(PolicyError) as caught:
            resolve_routing_policy(
                {"capacityFactors": {"worker-b": "0"}},
                chart(),
                {"capacityFactors": {"worker-b": "2"}},
            )
        assert str(caught.value) == (
            VALIDATE + 'spec.routing.capacityFactors["worker-b"] must be positive, got "0"'
        )


# --- publisher options ---------------------------------------------------------------------------

OPTIONS = "spec.routing.publisher.options"


class TestPublisherOptions:
    def test_options_within_the_limits_are_kept_raw(self) -> None:
        options = {f"k{i}": "v" * 4096 for i in range(32)} | {"k" * 128: "v"}
        options.pop("k0")
        policy = resolve_routing_policy({"publisher": {"options": options}}, chart())
        assert policy.publisher == {"options": options}

    def test_more_than_32_entries_are_refused(self) -> None:
        options = {f"k{i}": "v" for i in range(33)}
        assert str(policy_error({"publisher": {"options": options}})) == (
            VALIDATE + f"{OPTIONS} must contain at most 32 entries, got 33"
        )

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"": "v"}, f"{OPTIONS} contains an empty or whitespace-only key"),
            ({" \t": "v"}, f"{OPTIONS} contains an empty or whitespace-only key"),
            ({"k" * 129: "v"}, f'{OPTIONS} key "{"k" * 129}" exceeds the 128-byte limit'),
            ({"é" * 65: "v"}, f'{OPTIONS} key "{"é" * 65}" exceeds the 128-byte limit'),
            ({"zone": ""}, f'{OPTIONS}["zone"] must not be empty or whitespace-only'),
            ({"zone": "  "}, f'{OPTIONS}["zone"] must not be empty or whitespace-only'),
            ({"zone": "v" * 4097}, f'{OPTIONS}["zone"] exceeds the 4096-byte value limit'),
            ({"a": "", "": "v"}, f"{OPTIONS} contains an empty or whitespace-only key"),
        ],
        ids=[
            "empty-key",
            "blank-key",
            "long-key",
            "long-key-bytes",
            "empty",
            "blank",
            "long",
            "sorted",
        ],
    )
    def test_each_limit_gives_omes_message(self, options: dict[str, str], message: str) -> None:
        assert str(policy_error({"publisher": {"options": options}})) == VALIDATE + message

    def test_an_option_value_must_be_a_string(self) -> None:
        assert str(policy_error({"publisher": {"options": {"a": 1}}})) == (
            VALIDATE + f'{OPTIONS}["a"] must be a string, got 1'
        )


# --- properties ------------------------------------------------------------------------------


class TestProperties:
    @settings(max_examples=100, deadline=None)
    @given(st.sets(st.sampled_from(REQUIRED), min_size=1))
    def test_any_incomplete_service_poll_is_refused_whatever_the_chart(
        self, missing: set[str]
    ) -> None:
        """The first missing field in OME's order is named."""
        poll = a_poll(**dict.fromkeys(missing, DROP))
        first = next(name for name in REQUIRED if name in missing)
        for config in (chart(), chart(CHART_POLL)):
            assert str(policy_error({"capacity": poll}, config)) == VALIDATE + MISSING[first]

    @settings(max_examples=100, deadline=None)
    @given(
        samples=st.integers(1, 100),
        data=st.data(),
        period_s=st.integers(1, 600),
    )
    def test_a_valid_service_poll_is_taken_as_written(
        self, samples: int, data: st.DataObject, period_s: int
    ) -> None:
        quorum = data.draw(st.integers(1, samples))
        timeout_ms = data.draw(st.integers(1, period_s * 1000 - 1))
        max_age_s = data.draw(st.integers(quorum * period_s, quorum * period_s + 3600))
        poll = a_poll(
            samples=samples,
            quorum=quorum,
            period=f"{period_s}s",
            timeout=f"{timeout_ms}ms",
            maxAge=f"{max_age_s}s",
        )
        policy = resolve_routing_policy({"capacity": poll}, chart(CHART_POLL))
        assert policy.capacity == CapacityPolicy(
            path="/capacity",
            method="GET",
            format="Report",
            samples=samples,
            quorum=quorum,
            period=Duration(period_s * 1_000_000_000),
            timeout=Duration(timeout_ms * 1_000_000),
            max_age=Duration(max_age_s * 1_000_000_000),
        )
