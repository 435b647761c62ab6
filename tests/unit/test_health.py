"""What /readyz and /healthz answer for each state of the replica (`kube.health`)."""

from __future__ import annotations

from typing import cast

import pytest
from lightkube import AsyncClient

from ome_routing.kube.health import Check, Health, answer
from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing.kube.watching import Informer


def an_informer(resource: object, *, listed: bool) -> Informer:
    informer = Informer(cast(AsyncClient, None), resource, None, namespaced=True)
    if listed:
        informer.synced.set()
    return informer


def ready(health: Health) -> tuple[int, str]:
    return answer("readyz", health.readiness())


def test_controller_runtime_answers_ok_or_each_check_and_the_verdict() -> None:
    assert answer("readyz", [Check("a"), Check("b")]) == (200, "ok")
    assert answer("readyz", [Check("a"), Check("b", "why")]) == (
        500,
        "[+]a ok\n[-]b failed: reason withheld\nreadyz check failed\n",
    )


def test_a_leader_is_not_ready_before_every_cache_it_reads_has_listed() -> None:
    isvcs = an_informer(InferenceService, listed=True)
    maps = an_informer(TrafficMap, listed=False)
    health = Health(leading=lambda: True, standby_answering=lambda: True)
    assert ready(health)[0] == 500, "leading, no caches set up yet"
    health.watch(isvcs, maps, needed=True)
    assert ready(health) == (
        500,
        "[+]leader-election ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n",
    )
    maps.synced.set()
    assert ready(health) == (200, "ok")


def test_without_leader_election_the_caches_decide() -> None:
    maps = an_informer(TrafficMap, listed=False)
    health = Health()
    health.watch(maps, needed=True)
    assert ready(health)[0] == 500
    maps.synced.set()
    assert ready(health) == (200, "ok")


@pytest.mark.parametrize(("answering", "status"), [(True, 200), (False, 500)])
def test_a_standby_is_ready_while_its_reads_of_the_lease_answer(
    answering: bool, status: int
) -> None:
    health = Health(leading=lambda: False, standby_answering=lambda: answering)
    assert ready(health)[0] == status


def test_a_replica_with_no_control_plane_work_is_ready() -> None:
    assert ready(Health(has_work=False)) == (200, "ok")


def test_a_cache_that_never_listed_does_not_fail_healthz() -> None:
    """An unserved kind (no Gateway API CRDs) keeps failing to list: not ready, not dead."""
    never = an_informer(TrafficMap, listed=False)
    never.list_failing = True
    never.heard_at = 0.0
    health = Health()
    health.watch(never)
    assert answer("healthz", health.liveness(now=1000.0)) == (200, "ok")


def test_a_sharded_replica_is_ready_while_its_member_lease_answers_and_its_caches_listed() -> None:
    """Holding no shard is no failure: a spare is ready, as a standby is."""
    answering = True
    maps = an_informer(TrafficMap, listed=False)
    health = Health(member_answering=lambda: answering)
    health.watch(maps, needed=True)
    assert ready(health) == (
        500,
        "[+]shard-membership ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n",
    )
    maps.synced.set()
    assert ready(health) == (200, "ok")
    answering = False
    assert ready(health) == (
        500,
        "[-]shard-membership failed: reason withheld\n[+]informer-sync ok\nreadyz check failed\n",
    )
