"""Builders for TrafficMap inputs: `a_map(a_home("worker-a", reports=3), ...)`."""

from __future__ import annotations

from collections.abc import Mapping

from ome_routing.core.capacity import NO_REPORT_YET, Verdict
from ome_routing.core.drains import Drain
from ome_routing.core.quantity import parse_quantity
from ome_routing.core.trafficmap import HomeInput, MapInput, PollingState
from ome_routing.core.weights import AllFailedPolicy


def a_home(
    cluster: str = "worker-a",
    *,
    admitted: int = 2,
    ready: int | None = None,
    factor: str | None = None,
    gated: bool = False,
    reports: int | None = None,
    fallback: str | None = None,
    polled: bool = True,
) -> HomeInput:
    """A home with `admitted` replicas, all ready unless `ready` says otherwise.

    `reports` gives it a ceiling; otherwise it falls back with `fallback` (or "no
    capacity report yet"); `polled=False` gives it no verdict at all.
    """
    verdict: Verdict | None = None
    if polled:
        verdict = (
            Verdict(ceiling=reports, fallback_reason=None)
            if reports is not None
            else Verdict(ceiling=None, fallback_reason=fallback or NO_REPORT_YET)
        )
    return HomeInput(
        cluster=cluster,
        endpoint=f"http://qwen3-0-6b.qwen3-0-6b.{cluster}.example.com",
        admitted=admitted,
        ready=admitted if ready is None else ready,
        factor=parse_quantity(factor) if factor is not None else None,
        probe_gated=gated,
        capacity=verdict,
    )


def a_map(
    *homes: HomeInput,
    placed: bool = True,
    polling: PollingState = PollingState.ON,
    drains: Mapping[str, str] | None = None,
    policy: AllFailedPolicy | None = None,
) -> MapInput:
    """A placed map over `homes`; `drains` maps drain ID to the cluster it holds."""
    return MapInput(
        placed=placed,
        homes=tuple(homes),
        polling=polling,
        drains={
            drain_id: Drain(cluster=cluster, reason="planned maintenance")
            for drain_id, cluster in (drains or {}).items()
        },
        all_failed_policy=policy,
    )
