"""The health probe's policy: the chart's rules, a service's rules, resolution, the digest."""

from __future__ import annotations

from typing import Any

import pytest
from builders import DROP, with_overrides
from tests.probe_spec import guide_probe

from ome_routing.core.config import ConfigError, OperatorConfig, config_from_values
from ome_routing.core.durations import parse_duration
from ome_routing.core.policy import PolicyError, resolve_routing_policy
from ome_routing.core.pollrules import ObserverLimits
from ome_routing.core.proberules import ProbePolicy, probe_digest, probe_digest_payload

PREFIX = "invalid multi-cluster configuration: "
VALIDATE = "validate routing policy: "
RESOLVE_PROBE = "resolve probe policy: "

#: The chart's commented example in OME's values.yaml.
CHART_EXAMPLE: dict[str, Any] = guide_probe()
#: The guide's per-service probe.
GUIDE_SERVICE_PROBE = with_overrides(
    CHART_EXAMPLE, {"period": "30s", "timeout": "5s", "allFailedPolicy": "Drain"}
)


def a_probe(**overrides: Any) -> dict[str, Any]:
    return with_overrides(CHART_EXAMPLE, overrides)


def values_with_probe(probe: Any, **observer: Any) -> dict[str, Any]:
    routing: dict[str, Any] = {"enabled": True, "probe": probe}
    if observer:
        routing["observer"] = observer
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": routing},
            }
        }
    }


def chart_error(probe: Any, **observer: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        config_from_values(values_with_probe(probe, **observer))
    return str(caught.value)


def policy_error(probe: Any, config: OperatorConfig | None = None) -> str:
    with pytest.raises(PolicyError) as caught:
        resolve_routing_policy({"probe": probe}, config or OperatorConfig())
    return str(caught.value)


def example_policy(**changes: Any) -> ProbePolicy:
    base: dict[str, Any] = {
        "path": "/v1/models",
        "method": "GET",
        "accept_statuses": (200,),
        "gate_statuses": (404, 500, 502, 503, 504),
        "period": parse_duration("10s"),
        "timeout": parse_duration("3s"),
        "failure_threshold": 3,
        "success_threshold": 2,
        "all_failed_policy": "PreserveTraffic",
    }
    return ProbePolicy(**(base | changes))


class TestChartProbe:
    def test_the_charts_example_probe_is_accepted(self) -> None:
        config = config_from_values(values_with_probe(CHART_EXAMPLE))
        assert config.probe_policy == example_policy()

    def test_an_empty_path_turns_the_probe_off_and_its_fields_are_not_judged(self) -> None:
        config = config_from_values(values_with_probe({"path": "", "method": "PUT"}))
        assert config.probe_policy is None

    def test_the_guides_timeout_example(self) -> None:
        assert chart_error(a_probe(timeout="10s")) == (
            PREFIX + "routing.probe.timeout (10s) must be shorter than routing.probe.period (10s)"
        )

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            ({"path": "healthz"}, 'routing.probe.path "healthz" must begin with "/"'),
            (
                {"path": "healthz", "method": DROP},
                'routing.probe.path "healthz" must begin with "/"',
            ),
            (
                {"method": DROP, "acceptStatuses": DROP},
                "routing.probe.method is required when routing.probe.path is set",
            ),
            ({"method": "PUT"}, 'routing.probe.method "PUT" must be GET, HEAD, or POST'),
            (
                {"acceptStatuses": [], "gateStatuses": DROP},
                "routing.probe.acceptStatuses is required when routing.probe.path is set",
            ),
            (
                {"gateStatuses": DROP, "acceptStatuses": [99]},
                "routing.probe.gateStatuses is required when routing.probe.path is set",
            ),
            (
                {"acceptStatuses": [200, 600], "gateStatuses": [401]},
                "routing.probe.acceptStatuses contains invalid HTTP status 600",
            ),
            (
                {"gateStatuses": [503, 99, 401]},
                "routing.probe.gateStatuses contains invalid HTTP status 99",
            ),
            (
                {"gateStatuses": [503, 429, 99]},
                "routing.probe.gateStatuses must not contain 429",
            ),
            (
                {"acceptStatuses": [200, 503], "gateStatuses": [503, 403]},
                "routing.probe.gateStatuses must not contain 403",
            ),
            (
                {"acceptStatuses": [200, 503], "gateStatuses": [503], "period": DROP},
                "routing.probe: status 503 is in both acceptStatuses and gateStatuses",
            ),
            (
                {"period": DROP, "timeout": DROP},
                "routing.probe.period must be positive when routing.probe.path is set",
            ),
            (
                {"timeout": DROP},
                "routing.probe.timeout must be positive when routing.probe.path is set",
            ),
            (
                {"failureThreshold": 0, "successThreshold": 0},
                "routing.probe.failureThreshold must be positive when routing.probe.path is set",
            ),
            (
                {"successThreshold": DROP, "allFailedPolicy": "x"},
                "routing.probe.successThreshold must be positive when routing.probe.path is set",
            ),
            (
                {"allFailedPolicy": "Ignore"},
                'routing.probe.allFailedPolicy "Ignore" must be "PreserveTraffic" or "Drain" '
                "when routing.probe.path is set",
            ),
        ],
    )
    def test_rules_in_omes_order(self, overrides: dict[str, Any], message: str) -> None:
        assert chart_error(a_probe(**overrides)) == PREFIX + message

    def test_the_period_must_reach_min_period_after_the_probes_own_rules(self) -> None:
        assert chart_error(a_probe(period="5s"), minPeriod="10s") == (
            PREFIX + "routing.probe.period (5s) must be at least routing.observer.minPeriod (10s)"
        )

    def test_the_probe_is_judged_before_the_poll(self) -> None:
        values = values_with_probe(a_probe(method="PUT"))
        values["ome"]["multicluster"]["config"]["routing"]["capacity"] = {"path": "x"}
        with pytest.raises(ConfigError) as caught:
            config_from_values(values)
        assert str(caught.value) == PREFIX + 'routing.probe.method "PUT" must be GET, HEAD, or POST'

    def test_a_status_list_must_hold_numbers(self) -> None:
        assert "routing.probe.acceptStatuses[0] must be a whole number" in chart_error(
            a_probe(acceptStatuses=["200"])
        )


class TestServiceProbe:
    def test_the_services_block_replaces_the_charts_as_a_whole(self) -> None:
        chart = OperatorConfig(probe_policy=example_policy())
        policy = resolve_routing_policy({"probe": GUIDE_SERVICE_PROBE}, chart)
        assert policy.probe_policy == example_policy(
            period=parse_duration("30s"),
            timeout=parse_duration("5s"),
            all_failed_policy="Drain",
        )

    def test_without_a_block_the_charts_probe_applies(self) -> None:
        chart = OperatorConfig(probe_policy=example_policy())
        assert resolve_routing_policy({}, chart).probe_policy == example_policy()

    def test_disabled_turns_the_charts_probe_off(self) -> None:
        chart = OperatorConfig(probe_policy=example_policy())
        assert resolve_routing_policy({"probe": {"disabled": True}}, chart).probe_policy is None

    def test_the_guides_overlap_example(self) -> None:
        assert policy_error(a_probe(acceptStatuses=[200, 503])) == (
            VALIDATE + "spec.routing.probe status 503 is in both acceptStatuses and gateStatuses"
        )

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            (
                {"disabled": True, "path": "/x"},
                "spec.routing.probe.disabled must not be combined with probe configuration fields",
            ),
            ({"path": DROP, "method": DROP}, "spec.routing.probe.path is required"),
            ({"path": "x", "method": DROP}, 'spec.routing.probe.path "x" must begin with "/"'),
            ({"method": DROP, "period": DROP}, "spec.routing.probe.method is required"),
            ({"method": "PUT"}, 'spec.routing.probe.method "PUT" must be GET, HEAD, or POST'),
            (
                {"acceptStatuses": DROP, "gateStatuses": DROP},
                "spec.routing.probe.acceptStatuses is required",
            ),
            ({"gateStatuses": []}, "spec.routing.probe.gateStatuses is required"),
            (
                {"acceptStatuses": [42], "gateStatuses": [401]},
                "spec.routing.probe.acceptStatuses contains invalid HTTP status 42; "
                "statuses must be between 100 and 599",
            ),
            (
                {"acceptStatuses": [200, 503], "gateStatuses": [503, 401]},
                "spec.routing.probe status 503 is in both acceptStatuses and gateStatuses",
            ),
            (
                {"acceptStatuses": [200, 503], "gateStatuses": [401, 503]},
                "spec.routing.probe.gateStatuses must not contain 401",
            ),
            (
                {"gateStatuses": [503, 700]},
                "spec.routing.probe.gateStatuses contains invalid HTTP status 700; "
                "statuses must be between 100 and 599",
            ),
            ({"period": "0s", "timeout": DROP}, "spec.routing.probe.period must be positive"),
            ({"timeout": DROP}, "spec.routing.probe.timeout must be positive"),
            (
                {"timeout": "10s"},
                "spec.routing.probe.timeout (10s) must be shorter than period (10s)",
            ),
            ({"failureThreshold": 0}, "spec.routing.probe.failureThreshold must be positive"),
            ({"successThreshold": DROP}, "spec.routing.probe.successThreshold must be positive"),
            (
                {"allFailedPolicy": "Ignore"},
                'spec.routing.probe.allFailedPolicy "Ignore" must be "PreserveTraffic" or "Drain"',
            ),
        ],
    )
    def test_rules_in_omes_per_service_order(self, overrides: dict[str, Any], message: str) -> None:
        assert policy_error(a_probe(**overrides)) == VALIDATE + message

    def test_a_period_below_min_period_fails_resolution(self) -> None:
        chart = OperatorConfig(observer=ObserverLimits(min_period=parse_duration("20s")))
        assert policy_error(a_probe(), chart) == (
            RESOLVE_PROBE
            + "spec.routing.probe.period (10s) must be at least routing.observer.minPeriod (20s)"
        )

    def test_the_probe_is_resolved_before_the_poll(self) -> None:
        chart = OperatorConfig(observer=ObserverLimits(min_period=parse_duration("20s")))
        poll = {
            "path": "/capacity",
            "method": "GET",
            "format": "report",
            "period": "20s",
            "timeout": "3s",
            "samples": 3,
            "quorum": 1,
            "maxAge": "40s",
        }
        with pytest.raises(PolicyError) as caught:
            resolve_routing_policy({"probe": a_probe(), "capacity": poll}, chart)
        assert str(caught.value).startswith(RESOLVE_PROBE)

    def test_an_unknown_field_is_named(self) -> None:
        assert "spec.routing.probe.peroid is not a known field" in policy_error(
            a_probe(peroid="10s")
        )


class TestDigest:
    def test_the_charts_example_digest(self) -> None:
        assert probe_digest(example_policy()) == (
            "sha256:0a3bbc1f65ab1d3e469f4cfb714a1cfea0e1d9e27d7241255af83022da31b76f"
        )

    def test_the_guides_service_probe_digest(self) -> None:
        policy = example_policy(
            period=parse_duration("30s"), timeout=parse_duration("5s"), all_failed_policy="Drain"
        )
        assert probe_digest(policy) == (
            "sha256:00fb689ecbf025673f392d67662d4d5f0f94d6ad6bbd1614b7ec9c3d3c906363"
        )

    def test_status_lists_are_sorted_and_deduplicated(self) -> None:
        shuffled = example_policy(gate_statuses=(504, 404, 503, 500, 502, 503))
        assert probe_digest(shuffled) == probe_digest(example_policy())

    def test_go_escapes_html_characters_in_the_path(self) -> None:
        payload = probe_digest_payload(example_policy(path="/a<b>&c"))
        assert b'"path":"/a\\u003cb\\u003e\\u0026c"' in payload

    @pytest.mark.parametrize(
        "change",
        [
            {"path": "/healthz"},
            {"method": "HEAD"},
            {"accept_statuses": (200, 204)},
            {"gate_statuses": (503,)},
            {"period": parse_duration("11s")},
            {"timeout": parse_duration("2s")},
            {"failure_threshold": 4},
            {"success_threshold": 1},
            {"all_failed_policy": "Drain"},
        ],
    )
    def test_every_setting_changes_the_digest(self, change: dict[str, Any]) -> None:
        assert probe_digest(example_policy(**change)) != probe_digest(example_policy())
