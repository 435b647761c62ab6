"""A home's identity as OME keys its capacity window, and the homes a service polls now.

Apart from the controller, which keeps the observer's homes in line with these keys.
The observer holds a key per home for as long as the home lives, so a key shares what
it can: the cluster names of every home are one string each, and an endpoint already
canonical is the string given, not a second copy of it.
"""

from __future__ import annotations

from functools import lru_cache
from sys import intern
from typing import NamedTuple

from ome_routing.core.digests import capacity_policy_digest
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.kube.reconcile import Routed
from ome_routing.observer.failures import PollFailure
from ome_routing.observer.polling import poll_target

ServiceKey = tuple[str, str]


class HomeKey(NamedTuple):
    """OME's identity of a home's capacity window: any change starts a new window."""

    owner_uid: str
    namespace: str
    name: str
    cluster: str
    #: the canonical endpoint (as given, if it has none: the observer then says why)
    endpoint: str
    #: `capacity_policy_digest` of the poll
    digest: str


@lru_cache(maxsize=1024)
def _digest(policy: CapacityPolicy) -> str:
    return capacity_policy_digest(policy)


@lru_cache(maxsize=4096)
def _target(endpoint: str) -> str:
    """The endpoint as OME identifies it, or as given if it is not a usable URL."""
    try:
        target = poll_target(endpoint)
    except PollFailure:
        return endpoint
    return endpoint if target == endpoint else target


def home_keys(key: ServiceKey, routed: Routed | None) -> dict[str, HomeKey]:
    """cluster -> `HomeKey` of the homes a service polls now (none while polling is off)."""
    poll = routed.poll if routed is not None else None
    if routed is None or poll is None:
        return {}
    namespace, name = key
    digest = _digest(poll)
    return {
        cluster: HomeKey(routed.uid, namespace, name, intern(cluster), _target(endpoint), digest)
        for cluster, endpoint in routed.targets().items()
    }
