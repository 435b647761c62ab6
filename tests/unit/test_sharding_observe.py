"""How a replica notes the group's Leases: from its watch and from its turns' lists.

The clock is one the test moves (standing in for `time.monotonic()`); no API server is
asked (the `ShardSet` never runs).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ome_routing.core.shards import member_lease_name
from ome_routing.kube.leader import ElectionSettings
from ome_routing.kube.sharding import ShardSet

SETTINGS = ElectionSettings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
GROUP = "routing"
NAME = member_lease_name(GROUP, "replica-b")
START = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def a_replica(clock: Clock) -> ShardSet:
    return ShardSet(
        cast(Any, None),
        namespace="routing",
        group=GROUP,
        identity="replica-a",
        shards=4,
        settings=SETTINGS,
        clock=clock,
    )


def member(version: str, renewed: float) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=NAME, namespace="routing", resourceVersion=version),
        spec=LeaseSpec(
            holderIdentity="replica-b",
            leaseDurationSeconds=15,
            renewTime=START + timedelta(seconds=renewed),
        ),
    )


def test_a_renewal_the_watch_brings_restarts_the_leases_clock_when_it_comes() -> None:
    clock = Clock()
    replica = a_replica(clock)
    replica._seen(("routing", NAME), None, member("10", 0).to_dict())
    clock.now += 3
    replica._seen(("routing", NAME), None, member("11", 3).to_dict())
    assert replica._observed[NAME].seen_change_at == 1003.0
    assert replica._observed[NAME].renew_time == START + timedelta(seconds=3)


def test_a_list_older_than_the_watchs_renewal_changes_nothing() -> None:
    """A list answered after the watch brought a newer version: its older renewTime is not
    taken for a change (which would restart the clock later and count a renewal twice)."""
    clock = Clock()
    replica = a_replica(clock)
    replica._seen(("routing", NAME), None, member("11", 3).to_dict())
    clock.now += 1
    replica._observe(NAME, member("10", 0), clock.now)
    assert replica._observed[NAME].seen_change_at == 1000.0
    assert replica._observed[NAME].renew_time == START + timedelta(seconds=3)
    assert replica._changes[NAME] == 1
    # the same version again (the next list): nothing either; a newer one: a change
    replica._observe(NAME, member("11", 3), clock.now)
    assert replica._changes[NAME] == 1
    replica._observe(NAME, member("12", 4), clock.now)
    assert (replica._observed[NAME].seen_change_at, replica._changes[NAME]) == (1001.0, 2)


def test_a_deletion_the_watch_brings_changes_nothing_until_a_list_says() -> None:
    clock = Clock()
    replica = a_replica(clock)
    replica._seen(("routing", NAME), None, member("11", 3).to_dict())
    clock.now += 1
    replica._seen(("routing", NAME), member("11", 3).to_dict(), None)
    assert replica._observed[NAME].seen_change_at == 1000.0


def test_a_lease_the_watch_brings_that_cannot_be_read_changes_nothing() -> None:
    """Left to the turns' lists: the handler neither raises (which would end the watch)
    nor notes anything."""
    clock = Clock()
    replica = a_replica(clock)
    replica._seen(("routing", NAME), None, member("11", 3).to_dict())
    garbled = member("12", 4).to_dict()
    garbled["spec"]["renewTime"] = "not a time"
    clock.now += 1
    replica._seen(("routing", NAME), None, garbled)
    assert replica._observed[NAME].seen_change_at == 1000.0
    assert replica._changes[NAME] == 1
