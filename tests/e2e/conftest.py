"""Fixtures on a real control plane: etcd + kube-apiserver on loopback, one per test session.

- `control_plane` (session): a started `LocalControlPlane` with the CRDs of `config/crd/`.
- `kubeconfig` (session): its admin kubeconfig.
- `kube_client`: an async lightkube client on that kubeconfig.
- `namespace`: a fresh namespace for one test, deleted with everything in it afterwards.

Every test under tests/e2e is marked `e2e`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from controller_harness import delete_namespace
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from tests.suite_hooks import register

from ome_routing.devcluster import LocalControlPlane, Tools, ensure_tools

E2E_DIR = Path(__file__).parent


register(E2E_DIR, ["e2e"], lambda progress: ensure_tools(progress=progress))


@pytest.fixture(scope="session")
def tools() -> Tools:
    """The control plane's binaries (built before the session by pytest_collection_finish)."""
    return ensure_tools()


@pytest.fixture(scope="session")
def control_plane(tools: Tools) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tools=tools) as plane:
        yield plane


@pytest.fixture(scope="session")
def kubeconfig(control_plane: LocalControlPlane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture
async def kube_client(kubeconfig: Path) -> AsyncIterator[AsyncClient]:
    # trust_env=False: the control plane is on loopback, never behind a proxy.
    client = AsyncClient(KubeConfig.from_file(kubeconfig), trust_env=False, field_manager="e2e")
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def namespace(
    kube_client: AsyncClient, control_plane: LocalControlPlane
) -> AsyncIterator[str]:
    created = await kube_client.create(Namespace(metadata=ObjectMeta(generateName="e2e-")))
    assert created.metadata is not None and created.metadata.name is not None
    name = created.metadata.name
    try:
        yield name
    finally:
        await asyncio.to_thread(delete_namespace, control_plane, name)
