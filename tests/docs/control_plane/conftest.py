"""The docs' `run control-plane` blocks, on one local control plane for the session.

The control plane is tests/e2e's: etcd and kube-apiserver on loopback with the CRDs of
`config/crd/` (`LocalControlPlane`), its binaries built before the first test when the
docs have any such block. Every test here is marked `e2e` (and `docs`).

- `docs_control_plane`: the started `LocalControlPlane`, one for all the blocks (module
  scope: it stops when they are done, rather than running beside tests/e2e's own).
- `control_plane_block_env`: a block's environment on it: KUBECONFIG, kubectl and helm on
  PATH after the virtualenv's bin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_checks import block_environment, blocks_marked
from tests.suite_hooks import Progress, register

from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

CONTROL_PLANE_DIR = Path(__file__).parent


def control_plane_blocks_exist() -> bool:
    return bool(blocks_marked("run control-plane"))


def _prepare(progress: Progress) -> None:
    if control_plane_blocks_exist():
        ensure_tools(progress=progress)


register(CONTROL_PLANE_DIR, ["e2e"], _prepare)


@pytest.fixture(scope="module")
def docs_control_plane() -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tools=ensure_tools()) as plane:
        yield plane


@pytest.fixture(scope="module")
def control_plane_block_env(docs_control_plane: LocalControlPlane) -> dict[str, str]:
    # env(): KUBECONFIG, and kubectl and helm first on PATH, then the virtualenv before them
    return block_environment(docs_control_plane.env(), kubeconfig=docs_control_plane.kubeconfig)
