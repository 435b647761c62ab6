"""`ome-routing dev up --node` and its `dev down`: the local control plane with one real node."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from ome_routing import __version__
from ome_routing_dev.devcluster import Tools
from ome_routing_dev.devcluster.image import image_dir
from ome_routing_dev.devcluster.node import STATE_FILE, LocalNode, NodeError
from ome_routing_dev.devcluster.node_sandbox import SandboxError
from ome_routing_dev.devcluster.node_tools import ensure_node_tools

__all__ = ["NodeError", "SandboxError", "default_images", "stop_node", "up_node"]


def default_images() -> list[Path]:
    """The controller image that `make image` built (its docker-archive), if there is one."""
    archive = image_dir() / f"ome-routing-{__version__}.docker.tar"
    return [archive] if archive.is_file() else []


def up_node(
    directory: Path, tools: Tools, images: Sequence[Path], progress: Callable[[str], None]
) -> None:
    """Start the control plane and the node, detached; print the shell lines to use them."""
    if os.geteuid() != 0:
        raise NodeError(
            "dev up --node needs root (namespaces, mounts, cgroups, a container runtime); "
            "run it as root, or leave out --node for the control plane alone"
        )
    chosen = list(images) or default_images()
    if not chosen:
        progress("no image to import: `make image` has not built the controller image yet")
    node_tools = ensure_node_tools(progress=progress)
    started = time.monotonic()
    # No CRDs: the chart installs them, as in a cluster (helm adopts no object it did not make).
    node = LocalNode(
        directory, tools, node_tools, images=chosen, detached=True, install_crds=False
    ).start()
    plane = node.plane
    pids = ", ".join(f"{name} {pid}" for name, pid in sorted(node.pids.items()))
    progress(
        f"kube-apiserver {plane.version} at {plane.server_url} and node local-node Ready "
        f"in {time.monotonic() - started:.1f}s (pids: {pids}; logs in {plane.dir} and "
        f"{node.layout.dir})"
    )
    for archive in chosen:
        progress(f"imported {archive}")
    progress(f"stop it with: ome-routing dev down --dir {shlex.quote(str(plane.dir))}")
    kubeconfig = shlex.quote(str(plane.kubeconfig))
    bin_dir = shlex.quote(str(plane.bin_dir))
    click.echo(f'export KUBECONFIG={kubeconfig}\nexport PATH={bin_dir}:"$PATH"')


def stop_node(directory: Path) -> bool:
    """Stop the control plane and node recorded in `directory`; False when there is none."""
    if not (directory / STATE_FILE).exists():
        return False
    LocalNode.attach(directory).stop()
    return True
