"""Which homes the prober holds, and the probe state they start from after a restart.

A home's probe state is keyed as OME keys it (`ProbeKey`): the owner's UID, the map,
the cluster, the canonical endpoint and the probe's `policyDigest`. So a recreated
service, a new endpoint or any changed probe setting starts the home over: the gate
lifts and the counts reset.

Unlike a capacity window, probe state survives a restart and a change of leader: when
the prober takes a home on, it restores the home's `entries[].probe` from the stored
map, if the map is controlled by this service and the entry's cluster, canonical
endpoint and `policyDigest` all match (OME's hydration, `core.probes.restore`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from ome_routing.core.proberules import ProbePolicy, probe_digest
from ome_routing.core.probes import ProbeState, Restored, restore
from ome_routing.kube.ownership import has_exact_controller, meta
from ome_routing.kube.reconcile import Routed
from ome_routing.observer.failures import PollFailure
from ome_routing.observer.polling import poll_target
from ome_routing.observer.prober import Prober

ServiceKey = tuple[str, str]
#: cluster -> (the home's probe state, the probe's digest), as `reconcile.build_view` takes it
ProbeStates = dict[str, tuple[ProbeState, str]]


class ProbeKey(NamedTuple):
    """OME's identity of a home's probe state: any change starts it over."""

    owner_uid: str
    namespace: str
    name: str
    cluster: str
    #: the canonical endpoint
    endpoint: str
    #: `probe_digest` of the probe
    digest: str


@lru_cache(maxsize=1024)
def _digest(policy: ProbePolicy) -> str:
    return probe_digest(policy)


@lru_cache(maxsize=4096)
def _canonical(endpoint: str) -> str | None:
    try:
        return poll_target(endpoint)
    except PollFailure:
        return None


def _stored_probe(
    tmap: Mapping[str, Any] | None, uid: str, cluster: str, endpoint: str, digest: str
) -> Mapping[str, Any] | None:
    """The map's `entries[].probe` of this home, if it may be restored."""
    if tmap is None or not has_exact_controller(tmap, str(meta(tmap).get("name")), uid):
        return None
    for entry in (tmap.get("spec") or {}).get("entries") or []:
        if not isinstance(entry, Mapping) or entry.get("cluster") != cluster:
            continue
        probe = entry.get("probe")
        stored_endpoint = entry.get("endpoint")
        if (
            isinstance(probe, Mapping)
            and probe.get("policyDigest") == digest
            and isinstance(stored_endpoint, str)
            and _canonical(stored_endpoint) == endpoint
        ):
            return probe
    return None


class ProbeTargets:
    """The prober's homes, service by service."""

    def __init__(self, prober: Prober, clock: Callable[[], datetime]) -> None:
        self._prober = prober
        self._clock = clock
        self._held: dict[ServiceKey, set[ProbeKey]] = {}

    @property
    def prober(self) -> Prober:
        return self._prober

    def sync(
        self, key: ServiceKey, routed: Routed | None, tmap: Mapping[str, Any] | None
    ) -> ProbeStates:
        """Make the prober's homes of one service the ones it probes now; their states."""
        policy = routed.probe if routed is not None else None
        wanted: dict[str, ProbeKey] = {}
        if routed is not None and policy is not None:
            namespace, name = key
            digest = _digest(policy)
            for cluster, endpoint in sorted(routed.probe_targets().items()):
                canonical = _canonical(endpoint)
                if canonical is None:
                    continue  # OME skips a home whose endpoint is not a usable URL
                wanted[cluster] = ProbeKey(routed.uid, namespace, name, cluster, canonical, digest)
        keep = set(wanted.values())
        for home in self._held.get(key, set()) - keep:
            self._prober.remove_target(home)
        states: ProbeStates = {}
        if policy is None or not keep:
            self._held.pop(key, None)
            return states
        self._held[key] = keep
        assert routed is not None
        for cluster, home in wanted.items():
            state = self._prober.state(home)
            if state is None:
                restored = self._restored(tmap, routed.uid, home, policy)
                state = self._prober.set_target(
                    home, home.endpoint, policy, restored, flow=home.namespace
                )
            if state is not None:
                states[cluster] = (state, home.digest)
        return states

    def _restored(
        self, tmap: Mapping[str, Any] | None, uid: str, home: ProbeKey, policy: ProbePolicy
    ) -> Restored | None:
        stored = _stored_probe(tmap, uid, home.cluster, home.endpoint, home.digest)
        return None if stored is None else restore(stored, self._clock(), policy)

    def forget(self, key: ServiceKey) -> None:
        self.sync(key, None, None)

    def gated(self, states: ProbeStates) -> int:
        """How many of the homes are gated now."""
        return sum(1 for state, _ in states.values() if state.gated)
