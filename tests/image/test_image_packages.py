"""The image's Python packages are the product's and its dependencies', none of the
development kit's (devkit/: the local control plane, node, gateways, image build, demo):
read from the built image's root filesystem, and from its `ome-routing`."""

from __future__ import annotations

from pathlib import Path

from container import Container, PodSettings

from ome_routing_dev.devcluster.image_sbom import SITE_DIRS

# what pip installs from image/python.lock (pip itself excepted) and the product's wheel
DIST_INFOS = {
    "aiohappyeyeballs-2.7.1",
    "aiohttp-3.14.5",
    "aiosignal-1.4.0",
    "anyio-4.16.0",
    "attrs-26.1.0",
    "click-8.5.1",
    "frozenlist-1.8.0",
    "h11-0.16.0",
    "h2-4.4.1",
    "hpack-4.2.0",
    "httpcore2-2.16.2",
    "httptools-0.9.0",
    "httpx2-2.16.2",
    "hyperframe-6.1.0",
    "idna-3.20",
    "lightkube-1.0.1",
    "lightkube_models-1.37.0.8",
    "markdown_it_py-4.3.0",
    "mdurl-0.1.2",
    "msgspec-0.23.0",
    "multidict-7.2.1",
    "ome_routing-0.1.0",
    "prometheus_client-0.26.0",
    "propcache-0.5.4",
    "pygments-2.21.0",
    "pyyaml-6.0.3",
    "rich-15.0.0",
    "truststore-0.10.5",
    "typing_extensions-4.16.0",
    "uvloop-0.23.0",
    "wsproto-1.3.2",
    "yarl-1.25.1",
}
# the importable names they install (lightkube_models' modules are under lightkube/)
TOP_LEVEL = {
    "_yaml",
    "aiohappyeyeballs",
    "aiohttp",
    "aiosignal",
    "anyio",
    "attr",
    "attrs",
    "click",
    "frozenlist",
    "h11",
    "h2",
    "hpack",
    "httpcore2",
    "httptools",
    "httpx2",
    "hyperframe",
    "idna",
    "lightkube",
    "markdown_it",
    "mdurl",
    "msgspec",
    "multidict",
    "ome_routing",
    "prometheus_client",
    "propcache",
    "pygments",
    "rich",
    "truststore",
    "typing_extensions.py",
    "uvloop",
    "wsproto",
    "yaml",
    "yarl",
    # the compiled poll path's shared mypyc runtime (its name is a hash of the modules)
    "<mypyc runtime>",
}
# the product's rooms: no devcluster, no demo
PRODUCT = {
    "__init__.py",
    "cli",
    "core",
    "kube",
    "kubectl",
    "logs.py",
    "metrics.py",
    "observer",
    "prometheus_adapter.py",
    "py.typed",
    "reporter",
}
MYPYC_RUNTIME = "__mypyc.cpython-311-x86_64-linux-gnu.so"


def site_entries(rootfs: Path) -> list[str]:
    """Every entry of the image's site directories, caches left out."""
    found = []
    for site in SITE_DIRS:
        directory = rootfs / site.lstrip("/")
        if directory.is_dir():
            found.extend(p.name for p in directory.iterdir() if p.name != "__pycache__")
    return found


def test_the_site_packages_hold_the_product_and_its_dependencies_only(bundle: Path) -> None:
    entries = site_entries(bundle / "rootfs")
    dist_infos = {e.removesuffix(".dist-info") for e in entries if e.endswith(".dist-info")}
    top_level = {
        "<mypyc runtime>" if e.endswith(MYPYC_RUNTIME) else e
        for e in entries
        if not e.endswith(".dist-info")
    }
    assert (dist_infos, top_level) == (DIST_INFOS, TOP_LEVEL)


def test_the_product_package_has_no_kit_module(bundle: Path) -> None:
    site = bundle / "rootfs" / SITE_DIRS[0].lstrip("/")
    package = {p.name for p in (site / "ome_routing").iterdir() if p.name != "__pycache__"}
    assert package == PRODUCT
    record = (site / "ome_routing-0.1.0.dist-info" / "RECORD").read_text()
    assert [line for line in record.splitlines() if "devcluster" in line or "demo" in line] == []


def test_the_product_registers_its_two_commands_and_no_subcommand(bundle: Path) -> None:
    site = bundle / "rootfs" / SITE_DIRS[0].lstrip("/")
    entry_points = (site / "ome_routing-0.1.0.dist-info" / "entry_points.txt").read_text()
    assert entry_points.split() == [
        "[console_scripts]",
        "kubectl-ome",
        "=",
        "ome_routing.cli.kubectl_ome:main",
        "ome-routing",
        "=",
        "ome_routing.cli.main:main",
    ]


def test_ome_routing_dev_in_the_image_says_it_needs_the_development_kit(
    bundle: Path, chart_pod: PodSettings
) -> None:
    """The image's own `ome-routing`, where only the product is installed."""
    result = Container(bundle, ["ome-routing", "dev", "up"], pod=chart_pod).run()
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "Error: `ome-routing dev` is part of ome-routing's development kit (ome-routing-dev), "
        "which is not installed; from a clone of the repository: pip install -c "
        "constraints.txt -e . -e ./devkit (or make setup)"
    )
