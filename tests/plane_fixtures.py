"""The local control plane for the suites that need one: the fixtures and set-up that
tests/e2e, tests/chaos, tests/image and tests/gateway share.

A suite's conftest imports the fixtures it uses (`from tests.plane_fixtures import
control_plane as control_plane`); pytest registers them for that suite's folder, so a
session-scoped plane is still one per suite, as if its conftest defined it.

- `tools` (session): the control plane's binaries (built before the session by the
  suite's `prepare`, see `prepare_tools`).
- `control_plane` (session): a started `LocalControlPlane` with the CRDs of `config/crd/`,
  whose API server records every ServiceAccount's requests (`rbac_audit`).
- `audit_log` (session): where it records them.
- `kubeconfig` (session): its admin kubeconfig.
- `kube_client`: an async lightkube client on that kubeconfig.
- `namespace`: a fresh namespace for one test, deleted with everything in it afterwards.

And `prepare_tools`, the `prepare` (tests.suite_hooks.register) of a suite that needs the
control plane's binaries before its first test. tests/e2e's helpers (controller_harness
and the rest) are on sys.path for every suite: the repository's conftest.py puts them there.
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
from tests import rbac_audit
from tests.suite_hooks import Progress

from ome_routing_dev.devcluster import LocalControlPlane, Tools, ensure_tools


def prepare_tools(progress: Progress | None = None) -> None:
    """Build the control plane's binaries (a cache hit once built), reporting progress."""
    ensure_tools(progress=progress)


@pytest.fixture(scope="session")
def tools() -> Tools:
    """The control plane's binaries (built before the session by the suite's `prepare`)."""
    return ensure_tools()


@pytest.fixture(scope="session")
def audit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit")


@pytest.fixture(scope="session")
def audit_log(audit_dir: Path) -> Path:
    return rbac_audit.log_path(audit_dir)


@pytest.fixture(scope="session")
def control_plane(tools: Tools, audit_dir: Path) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tools=tools, apiserver_flags=rbac_audit.flags(audit_dir)) as plane:
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
