"""Fixtures on a one-node Kubernetes (`devcluster.node.LocalNode`), as root.

- `node` (session): the local control plane and one real node (kubelet, containerd,
  kube-proxy, kube-controller-manager, kube-scheduler) in a sandbox of its own namespaces,
  with the controller image of this checkout (`make image`) imported.
- `plane` (session): its control plane (kubectl, helm, the kubeconfig).
- `namespace`: a fresh namespace for one test, deleted afterwards (the namespace
  controller empties it, as in any cluster).

Every test here is marked `node` and `e2e`. Not as root, every test is skipped with the
reason. `make test` runs the suite as root (CI does); `make test-node` runs it alone.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.suite_hooks import Progress, register

from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools
from ome_routing_dev.devcluster.image import Image, build_image
from ome_routing_dev.devcluster.node import LocalNode
from ome_routing_dev.devcluster.node_tools import ensure_node_tools

NODE_DIR = Path(__file__).parent
REPO = NODE_DIR.parents[1]
sys.path.insert(0, str(NODE_DIR))

from scene import (  # noqa: E402
    CONTROLLER_CHART,
    CONTROLLER_NAMESPACE,
    CONTROLLER_RELEASE,
    REPORTER_NAMESPACE,
    REPORTER_RELEASE,
    helm,
    install_reporter,
    values_file,
)

IS_ROOT = os.geteuid() == 0


def _prepare(progress: Progress) -> None:
    """The binaries (the node's take minutes on a cold Go cache) and the image."""
    if not IS_ROOT:
        return
    ensure_tools(progress=progress)
    ensure_node_tools(progress=progress)
    build_image(REPO, progress=progress)


register(NODE_DIR, ["node", "e2e"], _prepare, label="node")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if IS_ROOT:
        return
    skip = pytest.mark.skip(
        reason="the local node needs root (namespaces, mounts, cgroups, a container runtime)"
    )
    for item in items:
        if NODE_DIR in Path(str(item.path)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def image() -> Image:
    return build_image(REPO)


@pytest.fixture(scope="session")
def node(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNode]:
    # The CRDs are the chart's to install (helm refuses objects it does not own).
    directory = tmp_path_factory.mktemp("node")
    with LocalNode(directory, images=[image.archive], install_crds=False) as running:
        yield running


@pytest.fixture(scope="session")
def plane(node: LocalNode) -> LocalControlPlane:
    return node.plane


@pytest.fixture
def namespace(plane: LocalControlPlane) -> Iterator[str]:
    name = f"node-{uuid.uuid4().hex[:8]}"
    plane.kubectl("create", "namespace", name)
    plane.kubectl(
        "wait", "--for=create", "serviceaccount/default",
        "-n", name, "--timeout=60s",
    )  # fmt: skip
    try:
        yield name
    finally:
        plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


Install = Callable[..., None]


@pytest.fixture(scope="session")
def crds(plane: LocalControlPlane) -> None:
    """The chart's CRDs, owned by the release every test installs (kept on uninstall)."""
    helm(plane, "install", CONTROLLER_RELEASE, str(CONTROLLER_CHART), "-n", CONTROLLER_NAMESPACE,
         "--create-namespace")  # fmt: skip
    helm(plane, "uninstall", CONTROLLER_RELEASE, "-n", CONTROLLER_NAMESPACE, "--wait")


@pytest.fixture(scope="session")
def reporter(plane: LocalControlPlane, crds: None) -> Iterator[str]:
    url = install_reporter(plane)
    try:
        yield url
    finally:
        helm(plane, "uninstall", REPORTER_RELEASE, "-n", REPORTER_NAMESPACE, "--wait")


@pytest.fixture
def install(plane: LocalControlPlane, crds: None, tmp_path: Path) -> Iterator[Install]:
    """`install(values)`: the controller chart as release `ome` in ome-system, uninstalled
    after the test."""
    installed: list[bool] = []

    def run(values: dict[str, Any] | None = None, *, verb: str = "install") -> None:
        args = ["-f", values_file(tmp_path, values, f"{verb}.yaml")] if values else []
        helm(plane, verb, CONTROLLER_RELEASE, str(CONTROLLER_CHART), "-n", CONTROLLER_NAMESPACE,
             "--create-namespace", "--wait", "--timeout=3m", *args)  # fmt: skip
        installed.append(True)

    try:
        yield run
    finally:
        if installed:
            helm(plane, "uninstall", CONTROLLER_RELEASE, "-n", CONTROLLER_NAMESPACE, "--wait")
