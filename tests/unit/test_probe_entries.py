"""Probe state in the TrafficMap: gates, allFailedPolicy, entries' `probe`, restoring it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tests.probe_spec import guide_probe

from ome_routing.core.capacity import Verdict
from ome_routing.core.config import OperatorConfig, config_from_values
from ome_routing.core.proberules import probe_digest
from ome_routing.core.probes import NOT_PROBED, ProbeResult, ProbeState
from ome_routing.core.trafficmap import TrafficMapView
from ome_routing.kube import reconcile
from ome_routing.kube.probing import ProbeKey, _stored_probe
from ome_routing.kube.reconcile import Frozen, Routed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UID = "0f8e2c1a-5b7d-4e39-9c61-2d4a8b3f7e10"
PROBE: dict[str, Any] = guide_probe()
CHART_DIGEST = "sha256:0a3bbc1f65ab1d3e469f4cfb714a1cfea0e1d9e27d7241255af83022da31b76f"
GATED = ProbeState(
    observed=True,
    result=ProbeResult.FAILING,
    message="HTTP 503",
    failures=3,
    gated=True,
    conclusive=True,
)
PASSING = ProbeState(observed=True, result=ProbeResult.PASSING, message="HTTP 200", conclusive=True)


def chart(**routing: Any) -> OperatorConfig:
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"].update(routing)
    return config_from_values(values)


def an_isvc(**spec_routing: Any) -> dict[str, Any]:
    isvc = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"].update(uid=UID, generation=3)
    isvc["spec"]["routing"].update(spec_routing)
    isvc["status"] = {
        "placement": {
            "phase": "Placed",
            "candidates": [
                {
                    "cluster": c,
                    "phase": "Admitted",
                    "endpoint": f"http://127.0.0.1:{port}",
                    "admittedReplicas": 2,
                    "readyReplicas": 2,
                }
                for c, port in (("worker-a", 9001), ("worker-b", 9002))
            ],
        }
    }
    return isvc


def routed(probe: dict[str, Any] | None = None, **routing: Any) -> Routed:
    config = chart(probe=PROBE)
    spec = {} if probe is None else {"probe": probe}
    decision = reconcile.plan(an_isvc(**spec, **routing), None, config)
    assert isinstance(decision, Routed)
    return decision


def ceilings(a: int | None, b: int | None) -> dict[str, Verdict | None]:
    return {
        "worker-a": Verdict(a, None if a is not None else "no capacity report yet"),
        "worker-b": Verdict(b, None if b is not None else "no capacity report yet"),
    }


def view_of(
    decision: Routed, a: ProbeState, b: ProbeState, caps: tuple[int | None, int | None]
) -> TrafficMapView:
    digest = probe_digest(decision.probe) if decision.probe is not None else ""
    return reconcile.build_view(
        decision, ceilings(*caps), {"worker-a": (a, digest), "worker-b": (b, digest)}
    )


def weights(view: Any) -> list[tuple[int, bool]]:
    return [(e.weight, e.healthy) for e in view.entries]


class TestGates:
    def test_the_charts_probe_applies_to_a_service_without_one(self) -> None:
        decision = routed()
        assert decision.probe is not None and probe_digest(decision.probe) == CHART_DIGEST

    def test_a_gated_home_gets_weight_0_and_is_unhealthy(self) -> None:
        view = view_of(routed(), GATED, PASSING, (None, None))
        assert weights(view) == [(0, False), (1, True)]
        assert view.condition("Routable").reason == "Routable"

    def test_preserve_traffic_keeps_the_weights_when_every_home_is_gated(self) -> None:
        view = view_of(routed(), GATED, GATED, (None, None))
        assert weights(view) == [(1, False), (1, False)]
        routable = view.condition("Routable")
        assert (routable.status, routable.reason, routable.message) == (
            "True",
            "AllHomesProbeFailed",
            "2 home(s) have conclusive probe failures; preserving traffic among homes with "
            "ready capacity",
        )

    def test_drain_keeps_every_weight_at_0(self) -> None:
        view = view_of(routed(dict(PROBE, allFailedPolicy="Drain")), GATED, GATED, (None, None))
        assert weights(view) == [(0, False), (0, False)]
        routable = view.condition("Routable")
        assert (routable.status, routable.reason, routable.message) == (
            "False",
            "AllHomesProbeFailed",
            "2 home(s) have conclusive probe failures; all route weights are zero",
        )

    def test_a_ceiling_of_0_beats_preserve_traffic(self) -> None:
        view = view_of(routed(), GATED, GATED, (0, 2))
        assert weights(view) == [(0, False), (1, False)]

    def test_preserve_traffic_still_applies_the_ceilings(self) -> None:
        view = view_of(routed(), GATED, GATED, (1, None))
        assert [e.weight for e in view.entries] == [1, 2]

    def test_a_home_never_conclusively_probed_is_not_gated(self) -> None:
        unknown = ProbeState(observed=True, result=ProbeResult.UNKNOWN, message="HTTP 302")
        view = view_of(routed(), unknown, GATED, (None, None))
        assert weights(view) == [(1, True), (0, False)]

    def test_disabled_turns_the_charts_probe_off(self) -> None:
        decision = routed({"disabled": True})
        assert decision.probe is None and decision.probe_targets() == {}
        view = view_of(decision, GATED, GATED, (None, None))
        assert weights(view) == [(1, True), (1, True)]
        assert all("probe" not in entry for entry in reconcile.entries_to_json(view))


class TestEntries:
    def test_a_gated_entry_carries_omes_probe_block(self) -> None:
        view = view_of(routed(), GATED, PASSING, (None, None))
        entries = reconcile.entries_to_json(view)
        assert entries[0]["probe"] == {
            "policyDigest": CHART_DIGEST,
            "result": "Failing",
            "gated": True,
            "consecutiveFailures": 3,
            "message": "HTTP 503",
        }
        assert entries[1]["probe"] == {
            "policyDigest": CHART_DIGEST,
            "result": "Passing",
            "message": "HTTP 200",
        }

    def test_a_home_not_yet_probed_has_no_probe_block(self) -> None:
        view = view_of(routed(), NOT_PROBED, NOT_PROBED, (None, None))
        assert all("probe" not in entry for entry in reconcile.entries_to_json(view))


class TestFreezing:
    def test_a_probe_below_min_period_freezes_the_map_with_resolve_probe_policy(self) -> None:
        config = chart(observer={"minPeriod": "5s"})
        decision = reconcile.plan(
            an_isvc(probe=dict(PROBE, period="4s", timeout="1s")), None, config
        )
        assert decision == Frozen(
            "resolve probe policy: spec.routing.probe.period (4s) must be at least "
            "routing.observer.minPeriod (5s)"
        )

    def test_a_status_in_both_lists_freezes_the_map_with_validate_routing_policy(self) -> None:
        decision = reconcile.plan(
            an_isvc(probe=dict(PROBE, acceptStatuses=[200, 503])), None, chart()
        )
        assert decision == Frozen(
            "validate routing policy: spec.routing.probe status 503 is in both acceptStatuses "
            "and gateStatuses"
        )


def a_stored_map(
    owner: str = UID, endpoint: str = "HTTP://127.0.0.1:9001/", digest: str = CHART_DIGEST
) -> dict[str, Any]:
    return {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": "qwen3-0-6b",
                    "uid": owner,
                    "controller": True,
                }
            ],
            "name": "qwen3-0-6b",
        },
        "spec": {
            "entries": [
                {
                    "cluster": "worker-a",
                    "endpoint": endpoint,
                    "probe": {"policyDigest": digest, "result": "Failing", "gated": True},
                }
            ]
        },
    }


class TestRestoring:
    KEY = ProbeKey(UID, "ns", "svc", "worker-a", "http://127.0.0.1:9001", CHART_DIGEST)

    def stored(self, tmap: dict[str, Any]) -> Any:
        key = self.KEY
        return _stored_probe(tmap, key.owner_uid, key.cluster, key.endpoint, key.digest)

    def test_a_matching_entry_is_restored_with_the_same_endpoint_spelled_differently(self) -> None:
        assert self.stored(a_stored_map()) == {
            "policyDigest": CHART_DIGEST,
            "result": "Failing",
            "gated": True,
        }

    def test_another_owner_endpoint_or_digest_starts_over(self) -> None:
        assert self.stored(a_stored_map(owner="another")) is None
        assert self.stored(a_stored_map(endpoint="http://127.0.0.1:9009")) is None
        assert self.stored(a_stored_map(digest="sha256:" + "1" * 64)) is None
