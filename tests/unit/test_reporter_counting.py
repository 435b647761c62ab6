"""The Kubernetes-backed reporter's counting rules: which pods count, and engine/decoder pairs."""

from __future__ import annotations

import pytest
from reporter_builders import a_pod, an_isvc

from ome_routing.reporter.counting import (
    Component,
    has_decoder,
    health_targets,
    pod_view,
    servable,
)


def views(*builders):  # type: ignore[no-untyped-def]
    out = [pod_view(b.build(), 8080) for b in builders]
    assert all(v is not None for v in out)
    return out


class TestWhichPodsCount:
    def test_ready_pods_count(self) -> None:
        assert servable(views(a_pod("a"), a_pod("b")), declared_decoder=False, health=None) == 2

    def test_a_pod_that_is_not_ready_does_not_count(self) -> None:
        pods = views(a_pod("a"), a_pod("b").not_ready())
        assert servable(pods, declared_decoder=False, health=None) == 1

    def test_a_terminating_pod_does_not_count_even_while_ready(self) -> None:
        pods = views(a_pod("a"), a_pod("b").terminating())
        assert servable(pods, declared_decoder=False, health=None) == 1

    def test_a_pod_without_a_ready_condition_does_not_count(self) -> None:
        raw = a_pod("a").build()
        raw["status"]["conditions"] = []
        assert servable(views_raw(raw), declared_decoder=False, health=None) == 0

    def test_router_pods_add_no_replicas(self) -> None:
        pods = views(a_pod("a"), a_pod("r").router())
        assert servable(pods, declared_decoder=False, health=None) == 1

    def test_a_pod_without_the_service_label_is_no_replica(self) -> None:
        raw = a_pod("a").build()
        del raw["metadata"]["labels"]["ome.io/inferenceservice"]
        assert pod_view(raw, 8080) is None

    def test_a_multi_pod_instance_counts_once_by_its_leader(self) -> None:
        leader = a_pod("l").with_labels(**{"ome.io/runner": "leader"}).build()
        worker = a_pod("w").with_labels(**{"ome.io/runner": "worker"}).build()
        assert pod_view(worker, 8080) is None
        assert servable(views_raw(leader), declared_decoder=False, health=None) == 1

    def test_a_pod_without_a_component_label_is_an_engine(self) -> None:
        view = pod_view(a_pod("a", component=None).build(), 8080)
        assert view is not None and view.component is Component.ENGINE

    def test_an_unknown_component_is_no_replica(self) -> None:
        assert pod_view(a_pod("a", component="sidecar").build(), 8080) is None


def views_raw(*raws):  # type: ignore[no-untyped-def]
    return [v for v in (pod_view(r, 8080) for r in raws) if v is not None]


class TestHealthResults:
    def test_with_health_checks_only_pods_that_passed_count(self) -> None:
        pods = views(a_pod("a"), a_pod("b"), a_pod("c"))
        health = {"uid-a": True, "uid-b": False}
        assert servable(pods, declared_decoder=False, health=health) == 1

    def test_a_pod_not_checked_yet_does_not_count(self) -> None:
        assert servable(views(a_pod("a")), declared_decoder=False, health={}) == 0

    def test_a_passed_check_does_not_make_an_unready_pod_count(self) -> None:
        pods = views(a_pod("a").not_ready())
        assert servable(pods, declared_decoder=False, health={"uid-a": True}) == 0

    def test_only_ready_pods_with_an_address_are_checked(self) -> None:
        pods = views(
            a_pod("a"), a_pod("b").not_ready(), a_pod("c").terminating(), a_pod("d", ip=None)
        )
        assert health_targets(pods) == {"uid-a": "10.1.0.1:8080"}

    def test_the_health_port_is_omes_probe_port_annotation_first(self) -> None:
        pod = a_pod("a", ports=[9000], annotations={"runtime.ome.io/probe-port": "30000"})
        assert health_targets(views(pod)) == {"uid-a": "10.1.0.1:30000"}

    def test_else_the_first_container_port_else_the_default(self) -> None:
        assert health_targets(views(a_pod("a", ports=[9000, 9001]))) == {"uid-a": "10.1.0.1:9000"}
        assert health_targets(views(a_pod("a"))) == {"uid-a": "10.1.0.1:8080"}

    def test_an_ipv6_pod_address_is_bracketed(self) -> None:
        assert health_targets(views(a_pod("a", ip="fd00::1"))) == {"uid-a": "[fd00::1]:8080"}


class TestEngineDecoderPairs:
    @pytest.mark.parametrize(
        ("engines", "decoders", "pairs"), [(3, 1, 1), (1, 3, 1), (2, 2, 2), (2, 0, 0), (0, 2, 0)]
    )
    def test_a_service_with_a_decoder_counts_the_lower_of_the_two(
        self, engines: int, decoders: int, pairs: int
    ) -> None:
        pods = views(
            *(a_pod(f"e{i}") for i in range(engines)),
            *(a_pod(f"d{i}").decoder() for i in range(decoders)),
        )
        assert servable(pods, declared_decoder=True, health=None) == pairs

    def test_pairs_count_healthy_pods_only(self) -> None:
        pods = views(a_pod("e1"), a_pod("e2"), a_pod("d1").decoder(), a_pod("d2").decoder())
        health = {"uid-e1": True, "uid-e2": True, "uid-d1": True, "uid-d2": False}
        assert servable(pods, declared_decoder=True, health=health) == 1

    def test_a_declared_decoder_with_no_pods_gives_zero(self) -> None:
        assert servable(views(a_pod("e1")), declared_decoder=True, health=None) == 0

    def test_decoder_pods_make_pairs_even_when_the_spec_does_not_say(self) -> None:
        pods = views(a_pod("e1"), a_pod("e2"), a_pod("d1").decoder())
        assert servable(pods, declared_decoder=False, health=None) == 1

    def test_a_decoder_pod_that_is_not_ready_still_makes_pairs(self) -> None:
        pods = views(a_pod("e1"), a_pod("d1").decoder().not_ready())
        assert servable(pods, declared_decoder=False, health=None) == 0

    def test_the_spec_says_whether_a_service_has_a_decoder(self) -> None:
        assert has_decoder(an_isvc(decoder=True))
        assert not has_decoder(an_isvc())
