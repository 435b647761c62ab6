"""`ome-routing demo --node`: the demo with both charts installed by helm on a real node."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ome_routing_dev.demo import DemoError
from ome_routing_dev.demo.node import run_node_demo
from ome_routing_dev.devcluster import ControlPlaneError, PkiError, ToolsError
from ome_routing_dev.devcluster.image import ImageError
from ome_routing_dev.devcluster.node import NodeError
from ome_routing_dev.devcluster.node_sandbox import SandboxError


def node_demo(repo: Path, keep: bool) -> None:
    """Run it and exit: 0 when every output matches, 1 otherwise, 130 on Ctrl-C."""
    if os.geteuid() != 0:
        raise click.ClickException(
            "demo --node needs root (a real node: namespaces, mounts, cgroups, a container "
            "runtime); `make demo` runs the demo without it"
        )
    try:
        ok = run_node_demo(repo, keep=keep)
    except (DemoError, ControlPlaneError, ToolsError, PkiError, ImageError, NodeError,
            SandboxError) as err:  # fmt: skip
        raise click.ClickException(str(err)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted; everything the demo started is stopped", err=True)
        sys.exit(130)
    sys.exit(0 if ok else 1)
