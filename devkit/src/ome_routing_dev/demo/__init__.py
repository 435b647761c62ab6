"""`ome-routing demo`: capacity polling end to end on a local control plane.

    ok = run_demo(DemoOptions(repo=find_repo([Path.cwd()])))

It starts a local control plane, reference reporters on loopback and the routing controller,
runs the specification's commands and compares their output with the specification's. It may
use the devcluster, reporter, kube, observer and core packages; nothing imports it but the CLI.
"""

from ome_routing_dev.demo.commands import DemoError
from ome_routing_dev.demo.run import DemoOptions, find_repo, run_demo

__all__ = ["DemoError", "DemoOptions", "find_repo", "run_demo"]
