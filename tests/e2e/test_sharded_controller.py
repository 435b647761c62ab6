"""Two sharded replicas on the local control plane: each routes the services of its shards.

Two `ome-routing controller --sharding --shards 8` processes share one group of Leases in
the test's namespace. Once each holds its half of the shards (a balanced placement: 4 and 4),
six routed services are created: every TrafficMap is written, each by the replica that
holds its service's shard (read from the shard Leases, and from the replicas' own
`trafficmap generated` lines). Then one replica is stopped (SIGTERM): the other takes its
shards and routes its services (a new placement of each is written by it).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    ControllerProcess,
    Reporter,
    condition,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    log_fields,
    place,
    unsharded_only,
)
from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease

from ome_routing.core.shards import shard_of
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = [
    pytest.mark.timeout(300),
    # its two replicas are sharded already: with each controller made two more, four
    # replicas would share the group, and the balanced placement it waits for never comes
    unsharded_only("it starts its own two sharded replicas"),
]

SHARDS = 8
SERVICES = [f"svc-{n}" for n in range(6)]
GROUP_LABEL = "routing.ome-routing.io/shard-group"
ROLE_LABEL = "routing.ome-routing.io/shard-role"


def sharded(command: list[str]) -> list[str]:
    return [*command, "--sharding", "--shards", str(SHARDS)]


def generated(process: ControllerProcess) -> dict[str, list[str]]:
    """isvc -> the `op` of each `trafficmap generated` line of the replica, in order."""
    found: dict[str, list[str]] = {}
    for fields in log_fields(process.log, "trafficmap generated"):
        found.setdefault(fields["isvc"], []).append(fields["op"])
    return found


async def holders(client: AsyncClient, namespace: str, group: str) -> dict[int, str]:
    """shard -> the identity holding its Lease now (no entry: no holder)."""
    held: dict[int, str] = {}
    async for lease in client.list(
        Lease, namespace=namespace, labels={GROUP_LABEL: group, ROLE_LABEL: "shard"}
    ):
        assert lease.metadata is not None and lease.metadata.labels is not None
        shard = int(lease.metadata.labels["routing.ome-routing.io/shard"])
        if lease.spec is not None and lease.spec.holderIdentity:
            held[shard] = lease.spec.holderIdentity
    return held


@pytest.fixture
async def reporter() -> AsyncIterator[Reporter]:
    started = await Reporter(servable=2).start()
    yield started
    await started.stop()


async def test_each_replica_writes_the_maps_of_its_shards_and_the_other_takes_over_on_sigterm(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    kube_client: AsyncClient,
    namespace: str,
    reporter: Reporter,
    tmp_path: Path,
) -> None:
    group = f"shards-{uuid.uuid4().hex[:8]}"
    replicas = {
        name: ControllerProcess(
            kubeconfig, ROUTING_ON, tmp_path, lease=group, identity=name, namespace=namespace,
            wrap=sharded,
        )
        for name in ("replica-a", "replica-b")
    }  # fmt: skip
    try:
        for process in replicas.values():
            process.start()
        for process in replicas.values():
            await process.wait_started()

        async def split_in_halves() -> dict[int, str] | None:
            held = await holders(kube_client, namespace, group)
            counts = [list(held.values()).count(name) for name in replicas]
            return held if len(held) == SHARDS and counts == [4, 4] else None

        await eventually(split_in_halves, what="each replica to hold 4 of the 8 shards")

        homes = {"worker-a": reporter.url, "worker-b": reporter.url}
        for name in SERVICES:
            manifest = isvc_manifest(name, namespace, FAST_POLL)
            await kubectl(control_plane, "apply", "-f", "-", input=manifest)
            await place(control_plane, name, namespace, homes)

        async def all_routed() -> bool:
            for name in SERVICES:
                tmap = await get_map(control_plane, name, namespace)
                if tmap is None or not (tmap.get("status") or {}).get("conditions"):
                    return False
            return True

        await eventually(all_routed, what="every TrafficMap written")
        held = await holders(kube_client, namespace, group)
        writers: dict[str, str] = {}
        for name in SERVICES:
            holder = held[shard_of(namespace, name, SHARDS)]
            key = f"{namespace}/{name}"
            by = [who for who, process in replicas.items() if key in generated(process)]
            assert by == [holder], (name, holder, by)
            writers[name] = holder
            tmap = await get_map(control_plane, name, namespace)
            assert condition(tmap, "Routable")["status"] == "True"

        stopped = "replica-a" if "replica-a" in writers.values() else "replica-b"
        staying = "replica-b" if stopped == "replica-a" else "replica-a"
        await replicas[stopped].stop()
        assert replicas[stopped].process is not None
        assert replicas[stopped].process.returncode == 0

        async def all_taken() -> bool:
            taken = await holders(kube_client, namespace, group)
            return len(taken) == SHARDS and set(taken.values()) == {staying}

        await eventually(all_taken, what=f"{staying} to hold every shard")

        # a new placement for every service: the one left writes the maps of both halves
        for name in SERVICES:
            await place(control_plane, name, namespace, homes, ready=1)

        async def rerouted() -> bool:
            ops = generated(replicas[staying])
            return all("updated" in ops.get(f"{namespace}/{name}", []) for name in SERVICES)

        await eventually(rerouted, what=f"{staying} to write every service's new placement")
        moved = [name for name in SERVICES if writers[name] == stopped]
        assert moved, "the stopped replica wrote some maps"
        for name in moved:
            # the map the stopped one created, updated by the one left (as polls come in)
            assert set(generated(replicas[staying])[f"{namespace}/{name}"]) == {"updated"}
    finally:
        for process in replicas.values():
            await process.stop()
