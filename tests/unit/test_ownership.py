"""Whose a TrafficMap is, when routing reaps it, and OME's snapshot fence (pure)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ome_routing.kube.ownership import (
    STALE_SNAPSHOT,
    has_exact_controller,
    not_ours_message,
    reapable,
    same_snapshot,
)

UID = "uid-1"
NAME = "chat"


def a_ref(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "name": NAME,
        "uid": UID,
        "controller": True,
    } | fields


def a_map(*refs: dict[str, Any], source: str = "", **extra: Any) -> dict[str, Any]:
    tmap: dict[str, Any] = {
        "metadata": {
            "name": NAME,
            "namespace": "prod",
            "uid": "map-uid",
            "resourceVersion": "9",
            "ownerReferences": list(refs),
        },
        "spec": {"service": NAME},
        "status": {"sourceUID": source} if source else {},
    }
    for key, value in extra.items():
        tmap["metadata"][key] = value
    return tmap


def an_isvc(uid: str = UID) -> dict[str, Any]:
    return {
        "metadata": {
            "name": NAME,
            "namespace": "prod",
            "uid": uid,
            "generation": 4,
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
        },
        "status": {"placement": {"plan": {"id": "p-1", "revision": 2, "mode": "All"}}},
    }


class TestExactController:
    @pytest.mark.parametrize(
        ("refs", "exact"),
        [
            ([a_ref()], True),
            ([a_ref(), a_ref(controller=False, uid="other")], True),
            ([], False),
            ([a_ref(controller=False)], False),
            ([a_ref(apiVersion="ome.io/v1")], False),
            ([a_ref(kind="Deployment")], False),
            ([a_ref(name="other")], False),
            ([a_ref(uid="other")], False),
            ([a_ref(), a_ref(uid="other")], False),
        ],
        ids=[
            "exact",
            "a-non-controller-ref-besides",
            "none",
            "not-a-controller",
            "other-version",
            "other-kind",
            "other-name",
            "other-uid",
            "a-second-controller-hidden-behind-the-first",
        ],
    )
    def test_every_controller_reference_must_name_the_service(
        self, refs: list[dict[str, Any]], exact: bool
    ) -> None:
        assert has_exact_controller(a_map(*refs), NAME, UID) is exact

    def test_a_map_recording_another_source_uid_is_not_ours_in_omes_words(self) -> None:
        assert not_ours_message(a_map(a_ref(), source="old"), NAME, UID) == (
            'TrafficMap prod/chat source UID "old" does not match InferenceService UID "uid-1"'
        )


class TestReapingWithTheServicePresent:
    def test_a_map_it_controls_is_deleted(self) -> None:
        assert reapable(an_isvc(), a_map(a_ref())) == (True, None)

    def test_a_map_being_deleted_is_left_alone(self) -> None:
        tmap = a_map(a_ref(), deletionTimestamp="2026-12-01T00:00:00Z")
        assert reapable(an_isvc(), tmap) == (False, None)

    def test_a_map_without_a_controller_that_records_its_uid_is_deleted(self) -> None:
        assert reapable(an_isvc(), a_map(source=UID)) == (True, None)

    @pytest.mark.parametrize(
        "tmap",
        [a_map(), a_map(source="another"), a_map(a_ref(uid="other"), source=UID)],
        ids=["no-provenance", "other-source", "other-controller"],
    )
    def test_a_map_that_is_not_provably_its_own_is_kept(self, tmap: dict[str, Any]) -> None:
        assert reapable(an_isvc(), tmap) == (False, None)

    def test_its_controlled_map_with_another_source_uid_is_an_error(self) -> None:
        assert reapable(an_isvc(), a_map(a_ref(), source="old")) == (
            False,
            'TrafficMap prod/chat source UID "old" does not match InferenceService UID "uid-1"',
        )

    def test_publisher_claims_without_its_finalizer_wait_for_the_repair(self) -> None:
        tmap = a_map(a_ref())
        tmap["status"]["publisher"] = {"claimedTargets": ["HTTPRoute/ome/chat"]}
        assert reapable(an_isvc(), tmap) == (False, None)
        tmap["metadata"]["finalizers"] = ["ome.io/trafficmap-publisher"]
        assert reapable(an_isvc(), tmap) == (True, None)


class TestReapingWithTheServiceGone:
    def test_an_orphan_that_records_its_source_is_deleted(self) -> None:
        assert reapable(None, a_map(source=UID)) == (True, None)

    @pytest.mark.parametrize(
        "tmap",
        [
            a_map(a_ref(), source=UID),
            a_map(),
            a_map(source=UID, deletionTimestamp="2026-12-01T00:00:00Z"),
        ],
        ids=["controlled-left-to-gc", "hand-written", "deleting"],
    )
    def test_anything_else_is_kept(self, tmap: dict[str, Any]) -> None:
        assert reapable(None, tmap) == (False, None)

    def test_an_orphan_of_another_service_name_is_kept(self) -> None:
        tmap = a_map(source=UID)
        tmap["spec"]["service"] = "other"
        assert reapable(None, tmap) == (False, None)

    def test_an_orphan_with_publisher_claims_waits_for_the_finalizer(self) -> None:
        tmap = a_map(source=UID)
        tmap["status"]["publisher"] = {"claimedTargets": ["HTTPRoute/ome/chat"]}
        assert reapable(None, tmap) == (False, None)


class TestSameSnapshot:
    def test_the_same_object_is_the_same_snapshot(self) -> None:
        assert same_snapshot(an_isvc(), copy.deepcopy(an_isvc()))

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            (("metadata", "uid"), "uid-2"),
            (("metadata", "generation"), 5),
            (("metadata", "labels"), {"team": "b"}),
            (("metadata", "annotations"), {}),
            (("metadata", "deletionTimestamp"), "2026-12-01T00:00:00Z"),
            (("status", "placement", "plan", "id"), "p-2"),
            (("status", "placement", "plan", "revision"), 3),
            (("status", "placement", "plan"), None),
        ],
    )
    def test_any_change_omes_fence_checks_breaks_it(
        self, path: tuple[str, ...], value: Any
    ) -> None:
        live = an_isvc()
        block = live
        for part in path[:-1]:
            block = block[part]
        block[path[-1]] = value
        assert not same_snapshot(an_isvc(), live)

    def test_a_status_change_outside_the_plans_identity_does_not(self) -> None:
        live = an_isvc()
        live["status"]["placement"]["plan"]["winner"] = "worker-b"
        live["status"]["placement"]["phase"] = "Placed"
        live["metadata"]["resourceVersion"] = "100"
        assert same_snapshot(an_isvc(), live)

    def test_kubectls_last_applied_annotation_the_cache_drops_is_left_out(self) -> None:
        live = an_isvc()
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
        assert same_snapshot(an_isvc(), live)

    def test_the_refusal_is_omes_error(self) -> None:
        assert STALE_SNAPSHOT == "placement source or plan changed"
