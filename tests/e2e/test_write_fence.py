"""A write held up between the gate and the wire past the renew deadline never reaches
the API server: the fence holds at the wire, for an update and for a create.

A real `LeaderElector` holds a Lease on the local control plane's API server, on a
monotonic clock the test moves; its `FencedClient` makes one write, through a gate that
asks the elector and, once the elector has let the write through in `FencedClient.send`,
moves the clock past the renew deadline: it stands for anything that holds the event loop
between that check and the socket (a full GC, a long preflight, a wait for a pooled
connection). The write must be refused
(the elector steps down: `LeadershipLost`), and a watch on the namespace, read up to a
marker written afterwards, must show that nothing of it reached the API server. Each
write is one the API server would accept had it arrived: the create has no precondition,
and nothing else changes the updated object.

The election's timings are long (lease 60 s, renew deadline 40 s, retry 10 s) so that
its renewal loop, which reads the same clock, does not wake while the write is held.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Service

from ome_routing.kube.fencing import FencedClient
from ome_routing.kube.leader import ElectionSettings, LeaderElector, LeadershipLost

pytestmark = pytest.mark.timeout(120)

SETTINGS = ElectionSettings(lease_duration=60.0, renew_deadline=40.0, retry_period=10.0)


class Clock:
    """`time.monotonic()` as the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class HeldAfterTheGate:
    """The elector as the write gate, with the event loop held up right after it lets a
    write through: the clock moves past the renew deadline once, after the first write
    the elector allows. The check made on the connection, before the bytes, must refuse
    it."""

    def __init__(self, elector: LeaderElector, clock: Clock) -> None:
        self._elector = elector
        self._clock = clock
        self.held: list[str] = []

    def check_write(self, request: str) -> float | None:
        budget = self._elector.check_write(request)
        if not self.held:
            self.held.append(request)
            self._clock.now += SETTINGS.renew_deadline  # the event loop held up that long
        return budget

    def check_read(self, request: str) -> None:
        self._elector.check_read(request)


def a_service(namespace: str, name: str) -> Service:
    return Service(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=ServiceSpec(
            type="ExternalName", externalName="worker-a.example.com", ports=[ServicePort(port=80)]
        ),
    )


async def watched_until(
    client: AsyncClient, namespace: str, since: str, last: str
) -> list[tuple[str, str]]:
    """Every change to the namespace's Services after `since`, up to the one named `last`."""
    seen: list[tuple[str, str]] = []
    async for kind, obj in client.watch(Service, namespace=namespace, resource_version=since):
        name = obj.metadata.name if obj.metadata else None
        seen.append((kind, str(name)))
        if name == last:
            return seen
    return seen


@pytest.mark.parametrize("write", ["create", "update"])
async def test_a_write_held_past_the_renew_deadline_after_the_gate_never_reaches_the_api_server(
    kube_client: AsyncClient, kubeconfig: Path, namespace: str, write: str
) -> None:
    existing = await kube_client.create(a_service(namespace, "chat-worker-a"))
    assert existing.metadata is not None and existing.metadata.resourceVersion is not None
    since = existing.metadata.resourceVersion
    clock = Clock()
    elector = LeaderElector(
        kube_client,
        namespace=namespace,
        name="ome-routing-fence",
        identity="leader",
        settings=SETTINGS,
        clock=clock,
    )
    gate = HeldAfterTheGate(elector, clock)
    fenced = FencedClient(
        gate, KubeConfig.from_file(kubeconfig), field_manager="ome-routing", trust_env=False
    )

    async def lead() -> None:
        if write == "create":
            await fenced.create(a_service(namespace, "chat-worker-b"))
        else:
            current = await fenced.get(Service, "chat-worker-a", namespace=namespace)
            assert current.metadata is not None
            current.metadata.labels = {"written": "late"}
            await fenced.replace(current)  # with the resourceVersion it read: still current

    try:
        with pytest.raises(LeadershipLost):
            await elector.run(lead)
    finally:
        await fenced.close()
    assert len(gate.held) == 1, gate.held  # the write was held, once, after the gate let it through

    await kube_client.create(a_service(namespace, "marker"))
    assert await watched_until(kube_client, namespace, since, "marker") == [("ADDED", "marker")]
    after = await kube_client.get(Service, "chat-worker-a", namespace=namespace)
    assert after.metadata is not None and not after.metadata.labels
