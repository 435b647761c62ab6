"""Shadow routing policies: where they come from, what they read, what they give."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.unit.builders import a_window, at, polled

from ome_routing.core.capacity import Verdict, Window
from ome_routing.core.config import ConfigError, OperatorConfig, config_from_values
from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.probes import ProbeResult, ProbeState
from ome_routing.core.shadow import (
    ANNOTATION,
    ANNOTATION_FIELD,
    CONFIG_FIELD,
    LIVE_DOES_NOT_POLL,
    NOT_EVALUATED,
    ShadowError,
    ShadowSource,
    candidate_routing,
    checked_config,
    compare,
    format_share,
    resolve_shadow,
    shadow_source,
    shadow_verdict,
)
from ome_routing.kube import reconcile, shadowing
from ome_routing.kube.reconcile import Routed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UID = "0f8e2c1a-5b7d-4e39-9c61-2d4a8b3f7e10"

POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 4,
    "quorum": 3,
    "period": "10s",
    "timeout": "3s",
    "maxAge": "40s",
}


def chart(**extra: Any) -> OperatorConfig:
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"].update(extra)
    return config_from_values(values)


def an_isvc(shadow: Any = None, **spec_routing: Any) -> dict[str, Any]:
    isvc = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"].update(uid=UID, generation=3)
    isvc["spec"]["routing"].update(spec_routing)
    if shadow is not None:
        text = shadow if isinstance(shadow, str) else json.dumps(shadow)
        isvc["metadata"]["annotations"] = {ANNOTATION: text}
    isvc["status"] = {
        "placement": {
            "phase": "Placed",
            "candidates": [
                {
                    "cluster": c,
                    "phase": "Admitted",
                    "endpoint": f"http://127.0.0.1:{port}",
                    "admittedReplicas": 4,
                    "readyReplicas": 4,
                }
                for c, port in (("worker-a", 9001), ("worker-b", 9002))
            ],
        }
    }
    return isvc


def a_poll(**fields: Any) -> CapacityPolicy:
    values = {**POLL, **fields}
    return CapacityPolicy(
        path=values["path"],
        method=values["method"],
        format=values["format"],
        samples=values["samples"],
        quorum=values["quorum"],
        period=Duration.parse(values["period"]),
        timeout=Duration.parse(values["timeout"]),
        max_age=Duration.parse(values["maxAge"]),
    )


def routed_of(isvc: dict[str, Any], config: OperatorConfig) -> Routed:
    decision = reconcile.plan(isvc, None, config)
    assert isinstance(decision, Routed), decision
    return decision


class TestWhereTheShadowComesFrom:
    def test_the_annotation_wins_over_the_chart(self) -> None:
        source = shadow_source({ANNOTATION: '{"capacityFactors": {"worker-a": "2"}}'}, {"x": 1})
        assert source == ShadowSource(ANNOTATION_FIELD, {"capacityFactors": {"worker-a": "2"}})

    def test_the_chart_applies_to_a_service_without_the_annotation(self) -> None:
        assert shadow_source({"other": "x"}, {"capacity": {}}) == ShadowSource(
            CONFIG_FIELD, {"capacity": {}}
        )

    def test_neither_means_no_shadow(self) -> None:
        assert shadow_source(None, None) is None
        assert shadow_source({}, {}) is None

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (
                "{quorum: 1}",
                'metadata.annotations["routing.ome-routing.io/shadow-routing"]: "{quorum: 1}" '
                "is not a JSON object: ",
            ),
            (
                "[1]",
                'metadata.annotations["routing.ome-routing.io/shadow-routing"]: [1] must be an '
                "object shaped like spec.routing",
            ),
        ],
    )
    def test_an_annotation_that_is_not_an_object_names_the_field_and_value(
        self, value: str, expected: str
    ) -> None:
        with pytest.raises(ShadowError) as caught:
            shadow_source({ANNOTATION: value}, None)
        assert str(caught.value).startswith(expected)

    def test_the_shadows_blocks_take_the_place_of_the_services_and_null_removes_one(self) -> None:
        live = {"capacity": {"path": "/a"}, "capacityFactors": {"worker-a": "2"}}
        source = ShadowSource(
            ANNOTATION_FIELD, {"capacity": {"path": "/b"}, "capacityFactors": None}
        )
        assert candidate_routing(live, source) == {"capacity": {"path": "/b"}}


class TestResolution:
    def test_a_shadow_quorum_resolves_with_the_services_other_fields(self) -> None:
        isvc = an_isvc()
        policy = resolve_shadow(
            isvc["spec"]["routing"],
            ShadowSource(ANNOTATION_FIELD, {"capacity": {**POLL, "quorum": 1}}),
            chart(),
        )
        assert policy.capacity == a_poll(quorum=1)

    def test_an_error_names_the_annotation_as_the_field(self) -> None:
        with pytest.raises(ShadowError) as caught:
            resolve_shadow(
                None,
                ShadowSource(ANNOTATION_FIELD, {"capacity": {**POLL, "quorum": 5}}),
                chart(),
            )
        field = ANNOTATION_FIELD
        assert str(caught.value) == (
            f"validate routing policy: {field}.capacity.quorum (5) must not exceed samples (4)"
        )

    def test_a_bad_chart_shadow_refuses_the_config_naming_routing_shadow(self) -> None:
        config = chart(shadow={"capacity": {**POLL, "period": "100ms", "timeout": "50ms"}})
        with pytest.raises(ConfigError) as caught:
            checked_config(config)
        assert str(caught.value) == (
            "invalid multi-cluster configuration: resolve capacity policy: "
            "routing.shadow.capacity.period (100ms) must be at least "
            "routing.observer.minPeriod (1s)"
        )

    def test_a_chart_shadow_that_is_not_a_mapping_fails_the_load(self) -> None:
        with pytest.raises(ConfigError) as caught:
            chart(shadow="quorum: 1")
        assert "routing.shadow" in str(caught.value)

    def test_a_good_chart_shadow_is_kept_and_an_empty_one_is_off(self) -> None:
        block = {"capacity": {**POLL, "quorum": 1}}
        assert checked_config(chart(shadow=block)).shadow == block
        assert chart(shadow={}).shadow is None
        assert chart().shadow is None

    def test_shadow_is_a_known_routing_key(self) -> None:
        assert chart(shadow={"capacity": {**POLL}}).warnings == ()


class TestTheShadowsCeiling:
    def test_its_quorum_is_judged_on_the_live_readings(self) -> None:
        live = polled(a_window(samples=4, quorum=3, max_age="40s"), 4, 4, 1)
        assert shadow_verdict(live, a_poll(quorum=1), at(20)) == Verdict(1, None)
        assert shadow_verdict(live, a_poll(quorum=2), at(20)) == Verdict(4, None)
        assert shadow_verdict(live, a_poll(quorum=3), at(20)) == Verdict(4, None)

    def test_a_samples_above_the_live_window_sees_only_what_live_keeps(self) -> None:
        live = polled(a_window(samples=2, quorum=2, max_age="60s"), 3, 3, 3)
        judged = shadow_verdict(live, a_poll(samples=4, quorum=3, maxAge="60s"), at(20))
        assert judged == Verdict(None, "capacity report awaiting quorum (2/3 accepted samples)")

    def test_its_own_max_age_ages_the_live_readings(self) -> None:
        live = polled(a_window(samples=4, quorum=1, max_age="60s"), 3, 3)
        judged = shadow_verdict(live, a_poll(quorum=1, maxAge="15s", period="5s"), at(30))
        assert judged == Verdict(
            None, "capacity report is stale (at least configured maximum age 15s)"
        )

    def test_a_failed_live_poll_fails_the_shadow_with_the_same_reason(self) -> None:
        from ome_routing.core.capacity import record_failure

        live = record_failure(polled(a_window(), 3, 3), "capacity endpoint returned HTTP 404")
        judged = shadow_verdict(live, a_poll(quorum=1), at(20))
        assert judged == Verdict(None, "capacity endpoint returned HTTP 404")

    def test_without_a_live_window_there_is_no_report_yet(self) -> None:
        assert shadow_verdict(None, a_poll(), at(0)) == Verdict(None, "no capacity report yet")


def windows_of(**by_cluster: Window) -> Any:
    return lambda cluster: by_cluster.get(cluster)


class TestEvaluation:
    def test_a_lower_shadow_quorum_shows_a_divergence_with_its_reason(self) -> None:
        config = chart()
        isvc = an_isvc(shadow={"capacity": {**POLL, "quorum": 1}})
        routed = routed_of(isvc, config)
        live_poll = routed.policy.capacity
        assert live_poll is not None

        def step(windows: dict[str, Window], now: datetime) -> Any:
            verdicts: dict[str, Verdict | None] = {
                c: shadow_verdict(w, live_poll, now) for c, w in windows.items()
            }
            live = reconcile.build_view(routed, verdicts)
            result = shadowing.evaluate(isvc, routed, live, windows.get, None, config, now)
            assert result is not None
            return live, result

        def window(*servables: int) -> Window:
            return polled(a_window(samples=4, quorum=3, max_age="40s"), *servables)

        # two readings: live awaits quorum (3), the shadow (quorum 1) has a ceiling of 4,
        # which caps nothing: the same shares
        live, result = step({"worker-a": window(4, 4), "worker-b": window(4, 4)}, at(10))
        assert [e.weight for e in live.entries] == [1, 1]
        assert [e.weight for e in result.view.entries] == [1, 1]
        assert result.divergent == 0
        assert all(h.reason == "" for h in result.homes)

        # a low reading: live (the 3rd lowest) keeps 4, the shadow (the lowest) drops to 1
        live, result = step({"worker-a": window(4, 4, 1), "worker-b": window(4, 4, 4)}, at(20))
        assert [e.weight for e in live.entries] == [1, 1]
        assert [e.weight for e in result.view.entries] == [1, 4]
        homes = {h.cluster: h for h in result.homes}
        assert (homes["worker-a"].live_weight, homes["worker-a"].shadow_weight) == (1, 1)
        assert homes["worker-a"].shadow_share == Fraction(1, 5)
        assert homes["worker-a"].reason == "live ceiling 4, shadow ceiling 1"
        assert homes["worker-b"].reason == "the other homes' weights differ"
        assert result.divergent == 2

    def test_a_shadow_poll_while_live_does_not_poll_is_not_evaluated(self) -> None:
        config = chart(capacity={"path": ""})
        isvc = an_isvc(shadow={"capacity": {**POLL, "quorum": 1}})
        del isvc["spec"]["routing"]["capacity"]
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        result = shadowing.evaluate(isvc, routed, live, windows_of(), None, config, at(0))
        assert result is not None
        assert ("capacity", LIVE_DOES_NOT_POLL) in result.not_evaluated

    def test_request_fields_that_differ_are_reported_as_not_evaluated(self) -> None:
        config = chart()
        isvc = an_isvc(shadow={"capacity": {**POLL, "period": "5s", "timeout": "2s"}})
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        result = shadowing.evaluate(isvc, routed, live, windows_of(), None, config, at(0))
        assert result is not None
        assert result.not_evaluated == (
            ("capacity.period", NOT_EVALUATED),
            ("capacity.timeout", NOT_EVALUATED),
        )
        assert result.divergent == 0

    def test_the_shadows_factors_and_probe_gates_apply_to_live_probe_results(self) -> None:
        config = chart()
        probe = {
            "path": "/healthz",
            "method": "GET",
            "acceptStatuses": [200],
            "gateStatuses": [503],
            "period": "10s",
            "timeout": "2s",
            "failureThreshold": 1,
            "successThreshold": 1,
            "allFailedPolicy": "PreserveTraffic",
        }
        isvc = an_isvc(
            shadow={"probe": {"disabled": True}, "capacityFactors": {"worker-b": "0.5"}},
            probe=probe,
        )
        routed = routed_of(isvc, config)
        assert routed.probe is not None
        gated = ProbeState(observed=True, result=ProbeResult.FAILING, gated=True, conclusive=True)
        probes = {"worker-a": (gated, "sha256:" + "0" * 64)}
        live = reconcile.build_view(routed, {}, probes)
        result = shadowing.evaluate(isvc, routed, live, windows_of(), probes, config, at(0))
        assert result is not None
        homes = {h.cluster: h for h in result.homes}
        assert (homes["worker-a"].live_weight, homes["worker-a"].shadow_weight) == (0, 2)
        assert "shadow probe does not gate it" in homes["worker-a"].reason
        assert homes["worker-b"].reason == "capacityFactor 1 -> 500m"

    def test_a_service_without_a_shadow_has_none(self) -> None:
        config = chart()
        isvc = an_isvc()
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        assert shadowing.evaluate(isvc, routed, live, windows_of(), None, config, at(0)) is None

    def test_a_shadow_that_turns_routing_off_has_no_table(self) -> None:
        config = chart()
        isvc = an_isvc(shadow={"enabled": False})
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        result = shadowing.evaluate(isvc, routed, live, windows_of(), None, config, at(0))
        assert result is not None and result.view is None
        assert {h.reason for h in result.homes} == {"not in the shadow table"}


class TestTheComparison:
    def test_equal_shares_are_not_a_divergence_even_with_other_weights(self) -> None:
        config = chart()
        isvc = an_isvc()
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        assert [h.divergent for h in compare(live.entries, live.entries)] == [False, False]

    @pytest.mark.parametrize(
        ("share", "text"),
        [(Fraction(2, 3), "66.7%"), (Fraction(1), "100.0%"), (Fraction(0), "0.0%")],
    )
    def test_shares_print_as_percentages(self, share: Fraction, text: str) -> None:
        assert format_share(share) == text


class TestTheShadowTrafficMap:
    def test_it_is_controlled_by_the_trafficmap_and_carries_the_shadows_table(self) -> None:
        config = chart()
        isvc = an_isvc(shadow={"capacity": {**POLL, "quorum": 1}})
        routed = routed_of(isvc, config)
        live = reconcile.build_view(routed, {})
        result = shadowing.evaluate(isvc, routed, live, windows_of(), None, config, at(0))
        assert result is not None
        tmap = {"metadata": {"name": "qwen3-0-6b", "uid": "map-uid"}}
        body = shadowing.shadow_body("ns", "qwen3-0-6b", tmap, result)
        assert body["apiVersion"] == "routing.ome-routing.io/v1alpha1"
        assert body["kind"] == "ShadowTrafficMap"
        assert body["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "TrafficMap",
                "name": "qwen3-0-6b",
                "uid": "map-uid",
                "controller": True,
            }
        ]
        status = body["status"]
        assert status["source"] == ANNOTATION_FIELD
        assert status["entries"] == reconcile.desired_spec("qwen3-0-6b", routed, live)["entries"]
        assert status["divergentHomes"] == 0
        assert status["homes"][0] == {
            "cluster": "worker-a",
            "liveWeight": 1,
            "shadowWeight": 1,
            "liveShare": "50.0%",
            "shadowShare": "50.0%",
        }


def test_the_isvc_builder_is_not_shared() -> None:
    """Guard: the builders return fresh objects (the tests above change them)."""
    first = an_isvc()
    second = copy.deepcopy(first)
    first["spec"]["routing"]["capacity"]["quorum"] = 9
    assert second != first
