"""A sharded replica's renewals on its own transport (`kube.lease_wire`), against the API server.

The wire writes a Lease exactly as lightkube's `replace` would (the stored object, its
resourceVersion, its field manager; a conflict is the API server's 409), over the admin
kubeconfig's TLS and client certificate, and with a ServiceAccount's token read again
from its file after a 401. A `ShardSet` renews on it and sends no renewal through the
client; a user signing in with an exec plugin keeps its renewals on the client.
"""

from __future__ import annotations

import asyncio
import logging
import stat
import sys
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import eventually, kubectl
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ome_routing.kube import lightkube_adapter
from ome_routing.kube.leader import ElectionSettings, micro_now
from ome_routing.kube.lease_wire import LeaseWire
from ome_routing.kube.sharding import GROUP_LABEL, ShardSet
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(120)

SETTINGS = ElectionSettings(lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)
ACCOUNT = "lease-writer"
#: what the ServiceAccount may do: read and write Leases of the test's namespace
GRANT = """
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {account}, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {account}, namespace: {namespace}}}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {account}, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {account}}}
subjects:
- {{kind: ServiceAccount, name: {account}, namespace: {namespace}}}
"""


def a_lease(namespace: str, name: str = "wire-test") -> Lease:
    now = micro_now()
    return Lease(
        metadata=ObjectMeta(name=name, namespace=namespace, labels={"test": "wire"}),
        spec=LeaseSpec(
            holderIdentity="replica-a",
            leaseDurationSeconds=15,
            acquireTime=now,
            renewTime=now,
            leaseTransitions=0,
        ),
    )


def kubeconfig_with_user(admin: Path, user: dict[str, Any], path: Path) -> Path:
    """The admin kubeconfig's cluster (its CA), with `user` as its only user."""
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": "admin", "user": user}]
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
async def account_token(control_plane: LocalControlPlane, namespace: str) -> str:
    """A token of a ServiceAccount that may write the namespace's Leases (TokenRequest)."""
    grant = GRANT.format(account=ACCOUNT, namespace=namespace)
    await kubectl(control_plane, "apply", "-f", "-", input=grant)
    created = await kubectl(
        control_plane, "create", "token", ACCOUNT, "-n", namespace, "--duration=1h"
    )
    return created.stdout.strip()


@pytest.fixture
async def admin_client(kubeconfig: Path) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(
        KubeConfig.from_file(kubeconfig), trust_env=False, field_manager="e2e-wire"
    )
    yield client
    await client.close()


async def test_a_lease_written_on_the_wire_is_stored_as_lightkubes_replace_stores_it(
    admin_client: AsyncClient, kube_client: AsyncClient, namespace: str
) -> None:
    wire, why = LeaseWire.of(admin_client)
    assert wire is not None, why
    try:
        created = await kube_client.create(a_lease(namespace))
        assert created.spec is not None
        created.spec.renewTime = micro_now() + timedelta(seconds=1)
        created.spec.holderIdentity = "replica-b"
        written = await wire.replace(created)
        stored = await kube_client.get(Lease, "wire-test", namespace=namespace)
        assert stored.spec == written.spec
        assert stored.spec is not None and stored.spec.holderIdentity == "replica-b"
        assert stored.spec.renewTime == created.spec.renewTime
        assert stored.metadata is not None and created.metadata is not None
        assert stored.metadata.resourceVersion == written.metadata.resourceVersion  # type: ignore[union-attr]
        assert stored.metadata.resourceVersion != created.metadata.resourceVersion
        managers = {f.manager: f.operation for f in stored.metadata.managedFields or []}
        assert managers.get("e2e-wire") == "Update", managers
        # the version it read is a precondition: written again with it, a conflict
        with pytest.raises(ApiError) as raised:
            await wire.replace(created)
        assert raised.value.status.code == 409
        assert "the object has been modified" in (raised.value.status.message or "")
    finally:
        if wire is not None:
            wire.close()


async def test_a_service_accounts_token_is_read_again_from_its_file_after_a_401(
    kubeconfig: Path, kube_client: AsyncClient, namespace: str, account_token: str, tmp_path: Path
) -> None:
    """As in a pod whose token the kubelet rotated: the token the config was read with is
    refused; the file holds the current one."""
    token_file = tmp_path / "token"
    token_file.write_text(account_token)
    user = {"token": "rotated-away", "tokenFile": str(token_file)}
    config = kubeconfig_with_user(kubeconfig, user, tmp_path / "sa.kubeconfig")
    client = AsyncClient(KubeConfig.from_file(config), trust_env=False, field_manager="e2e-sa")
    wire, why = LeaseWire.of(client)
    assert wire is not None, why
    try:
        created = await kube_client.create(a_lease(namespace))
        assert created.spec is not None
        created.spec.holderIdentity = "replica-sa"
        await wire.replace(created)
        stored = await kube_client.get(Lease, "wire-test", namespace=namespace)
        assert stored.spec is not None and stored.spec.holderIdentity == "replica-sa"
        # and a file that holds no valid token either: the 401 is the error
        token_file.write_text("not-a-token")
        stored.spec.holderIdentity = "nobody"
        refused = LeaseWire.of(client)[0]
        assert refused is not None
        with pytest.raises(ApiError) as raised:
            await refused.replace(stored)
        refused.close()
        assert raised.value.status.code == 401
    finally:
        if wire is not None:
            wire.close()
        await client.close()


async def run_replica(client: AsyncClient, namespace: str, shards: int, turns: int) -> list[str]:
    """Run one replica over `shards` shards until each Lease of its group (the shards'
    and its member Lease) was seen renewed `turns` times after it took them all; returns
    the PUTs its client sent meanwhile, by path."""
    puts: list[str] = []

    async def count(request: Any, stream: bool, send: lightkube_adapter.Send) -> Any:
        if request.method == "PUT":
            puts.append(request.url.path)
        return await send(request, stream)

    lightkube_adapter.filter_sends(client, count)
    shard_set = ShardSet(
        client,
        namespace=namespace,
        group="wire",
        identity="replica-a",
        shards=shards,
        settings=SETTINGS,
    )
    task = asyncio.create_task(shard_set.run())
    try:
        await eventually(
            lambda: _true(shard_set.held() == frozenset(range(shards))), 30, "every shard held"
        )
        taken = len(puts)
        for _ in range(turns):
            before = await renew_times(client, namespace)
            assert len(before) == shards + 1, before

            async def renewed(before: dict[str, datetime | None] = before) -> bool:
                now = await renew_times(client, namespace)
                return all(now[name] != before[name] for name in before)

            await eventually(renewed, 30, "a renewal of every Lease")
        return puts[taken:]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def renew_times(client: AsyncClient, namespace: str) -> dict[str, datetime | None]:
    return {
        lease.metadata.name: lease.spec.renewTime if lease.spec else None
        async for lease in client.list(Lease, namespace=namespace, labels={GROUP_LABEL: "wire"})
        if lease.metadata and lease.metadata.name
    }


async def _true(value: bool) -> bool:
    return value


async def test_a_replica_renews_its_leases_on_its_wire_and_sends_none_through_its_client(
    kubeconfig: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ome_routing.kube.sharding")
    client = AsyncClient(KubeConfig.from_file(kubeconfig), trust_env=False, field_manager="e2e")
    try:
        puts = await run_replica(client, namespace, shards=3, turns=3)
    finally:
        await client.close()
    assert puts == []
    assert not [r for r in caplog.records if "through the Kubernetes client" in r.getMessage()]


async def test_a_user_that_signs_in_with_an_exec_plugin_renews_through_the_client(
    kubeconfig: Path,
    namespace: str,
    account_token: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The wire cannot run the plugin, so the replica keeps its renewals on lightkube's
    client (which runs it), and says so once."""
    caplog.set_level(logging.INFO, logger="ome_routing.kube.sharding")
    plugin = tmp_path / "credential-plugin"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": account_token},
    }
    plugin.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({credential!r}))\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    config = kubeconfig_with_user(kubeconfig, user, tmp_path / "exec.kubeconfig")
    client = AsyncClient(KubeConfig.from_file(config), trust_env=False, field_manager="e2e")
    try:
        puts = await run_replica(client, namespace, shards=2, turns=2)
    finally:
        await client.close()
    assert len(puts) >= 6 and all("/leases/wire-" in p for p in puts), puts
    reasons = [
        getattr(r, "reason", None)
        for r in caplog.records
        if r.getMessage() == "renewing leases through the Kubernetes client"
    ]
    assert reasons == ["the kubeconfig's user signs in with an exec plugin"]
