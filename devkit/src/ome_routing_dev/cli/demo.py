"""`ome-routing demo`: the specification's capacity-polling walkthrough, run and checked."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ome_routing_dev.demo import DemoError, DemoOptions, find_repo, run_demo
from ome_routing_dev.devcluster import ControlPlaneError, PkiError, ToolsError
from ome_routing_dev.devcluster.gateways import GATEWAY_NAMES

# The repository this package was installed from (an editable install of devkit/), after
# the cwd: devkit/src/ome_routing_dev/cli/demo.py
_PACKAGE_REPO = Path(__file__).resolve().parents[4]


@click.command()
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the control plane, reporters and controller running until Ctrl-C, "
    "and print how to reach them with kubectl.",
)
@click.option(
    "--kubernetes-reporter",
    is_flag=True,
    help="Count each home's replicas from Pod objects with `reporter --kubernetes`, "
    "instead of fixed counts.",
)
@click.option(
    "--traffic",
    is_flag=True,
    help="Also publish the TrafficMap to a local gateway (see --gateway; built once into the cache "
    "by `ome-routing dev tools`) and send requests through it after Step 3. Needs root.",
)
@click.option(
    "--gateway",
    type=click.Choice(GATEWAY_NAMES),
    default="traefik",
    show_default=True,
    help="With --traffic, the gateway: traefik (the publisher writes hostname "
    "EndpointSlices; the split is exact) or contour (Contour and Envoy, serving OME's default "
    "ExternalName backends; Envoy draws each request, so the split is checked by a "
    "binomial test).",
)
@click.option(
    "--node",
    is_flag=True,
    help="Run it on a real node (`dev up --node`; as root): the controller and the capacity "
    "reporter installed by helm as pods of the image `make image` builds, the homes' model "
    "servers pods with readiness probes.",
)
def demo(keep: bool, kubernetes_reporter: bool, traffic: bool, gateway: str, node: bool) -> None:
    """Run capacity polling end to end on a local control plane, and check the outputs.

    Starts etcd and kube-apiserver on 127.0.0.1 (the first run builds them), registers the
    workload clusters worker-a and worker-b, serves a capacity reporter for each on loopback
    (3 and 1 servable replicas), creates the example InferenceService placed on both, and
    runs the routing controller with the example chart values. Then it runs the
    specification's kubectl commands and compares what they print with the specification:
    first with both ceilings, then after worker-b's poll starts getting a 404.

    With --traffic, each home also gets a hostname and a loopback address of its own, the
    controller publishes the TrafficMap to a Gateway served by Traefik (hostname
    EndpointSlices) or, with --gateway contour, by Contour and Envoy (OME's default
    ExternalName backends), and after Step 3 the demo sends requests to the global host
    through it: the split matches the weights (2:1), then follows worker-a's count lowered
    to 1 (1:1).

    Exits 0 when every output matches, 1 when one differs or a step fails, 130 on Ctrl-C.
    Everything it started is stopped before it exits.
    """
    if node:
        _node_demo(keep, kubernetes_reporter or traffic)
    if kubernetes_reporter and traffic:
        raise click.UsageError("--kubernetes-reporter and --traffic can't be combined")
    if gateway != "traefik" and not traffic:
        raise click.UsageError("--gateway needs --traffic")
    try:
        repo = find_repo([Path.cwd(), _PACKAGE_REPO])
        options = DemoOptions(
            repo=repo,
            keep=keep,
            kubernetes_reporter=kubernetes_reporter,
            traffic=traffic,
            gateway=gateway,
        )
        ok = run_demo(options)
    except (DemoError, ControlPlaneError, ToolsError, PkiError) as err:
        raise click.ClickException(str(err)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted; everything the demo started is stopped", err=True)
        sys.exit(130)
    sys.exit(0 if ok else 1)


def _node_demo(keep: bool, other_modes: bool) -> None:
    from ome_routing_dev.cli.demo_node import node_demo

    if other_modes:
        raise click.UsageError("--node can't be combined with --kubernetes-reporter or --traffic")
    node_demo(find_repo([Path.cwd(), _PACKAGE_REPO]), keep)
