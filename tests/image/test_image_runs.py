"""The image runs as the chart runs it: crun, its own user, a read-only root filesystem and
no capabilities; the controller in it keeps a TrafficMap on the local control plane."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import aiohttp
import pytest
import yaml
from container import Container, PodSettings
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    Reporter,
    eventually,
    free_port,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)

from ome_routing import __version__
from ome_routing.cli.validate import VALID_PREFIX
from ome_routing_dev.devcluster import LocalControlPlane
from ome_routing_dev.devcluster.compiled import module_names
from ome_routing_dev.devcluster.image import GID, UID

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-resources"

pytestmark = pytest.mark.timeout(240)


def test_the_entrypoint_prints_the_version(bundle: Path, chart_pod: PodSettings) -> None:
    result = Container(bundle, ["ome-routing", "--version"], pod=chart_pod).run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"ome-routing, version {__version__}"


def test_the_process_runs_as_the_images_non_root_user(bundle: Path) -> None:
    """The UID and GID the chart's securityContext names (runAsUser, runAsGroup)."""
    script = "import os; print(os.getuid(), os.getgid(), os.getgroups())"
    result = Container(bundle, ["python3.11", "-c", script]).run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(maxsplit=2)[:2] == [str(UID), str(GID)]


def test_the_poll_path_in_the_image_is_the_compiled_one(
    bundle: Path, chart_pod: PodSettings
) -> None:
    """Every module of the poll path imports its extension module (mypyc), on the image's
    own Python."""
    names = module_names()
    script = (
        "import importlib, json, sys\n"
        f"names = {names!r}\n"
        "json.dump({n: importlib.import_module(n).__file__ for n in names}, sys.stdout)"
    )
    result = Container(bundle, ["python3.11", "-c", script], pod=chart_pod).run()
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert sorted(loaded) == sorted(names)
    # an extension module for CPython 3.11, whatever the machine (x86_64-linux-gnu here)
    assert all(".cpython-311-" in path and path.endswith(".so") for path in loaded.values()), loaded


def test_as_the_chart_runs_it_only_tmp_is_writable(bundle: Path, chart_pod: PodSettings) -> None:
    script = (
        "import tempfile\n"
        "with tempfile.NamedTemporaryFile() as f: f.write(b'ok')\n"
        "open('/usr/local/lib/probe', 'w')"
    )
    result = Container(bundle, ["python3.11", "-c", script], pod=chart_pod).run()
    assert result.returncode != 0
    assert "Read-only file system: '/usr/local/lib/probe'" in result.stderr


def test_validate_config_accepts_the_charts_default_values(
    bundle: Path, chart_pod: PodSettings
) -> None:
    args = ["ome-routing", "validate-config", "-f", "/chart/values.yaml"]
    container = Container(bundle, args, {"/chart": CHART}, pod=chart_pod)
    result = container.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(VALID_PREFIX), result.stdout


async def test_the_controller_in_the_image_writes_a_trafficmap(
    bundle: Path, chart_pod: PodSettings, control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """The controller, started from the image as the chart starts it (`ome-routing
    controller`, its security context, /tmp an emptyDir: the Kubernetes client writes a
    kubeconfig's embedded certificates there), reaches the API server on loopback, reports ready, and keeps a
    TrafficMap capped at the reporters' capacity."""
    namespace = f"image-{free_port()}"
    await kubectl(control_plane, "create", "namespace", namespace)
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(control_plane.kubeconfig, config / "kubeconfig")
    (config / "values.yaml").write_text(yaml.safe_dump(ROUTING_ON))
    for file in config.iterdir():
        file.chmod(0o644)  # the image's user reads what a Secret/ConfigMap volume would hold
    args = [
        "ome-routing",
        "controller",
        "--config=/config/values.yaml",
        "--kubeconfig=/config/kubeconfig",
        f"--namespace={namespace}",
        # port 0: the controller takes a free port itself and logs it; a port picked here
        # could be taken by another process before the container binds it
        "--metrics-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
        "--lease-name=ome-routing-image-test",
    ]
    container = Container(bundle, args, {"/config": config}, pod=chart_pod)
    container.start(tmp_path / "controller.log")
    reporters = {c: await Reporter(servable=1).start() for c in ("worker-a", "worker-b")}
    try:

        async def ready() -> bool:
            assert container.process is not None
            log = (tmp_path / "controller.log").read_text()
            if container.process.poll() is not None:
                raise AssertionError(f"the container exited:\n{log}")
            bound = re.search(r'serving /healthz and /readyz.*"address": "127\.0\.0\.1:(\d+)"', log)
            if bound is None:
                return False
            port = bound.group(1)
            try:
                async with (
                    aiohttp.ClientSession(trust_env=False) as session,
                    session.get(f"http://127.0.0.1:{port}/readyz") as response,
                ):
                    return response.status == 200
            except aiohttp.ClientConnectionError:
                return False

        await eventually(ready, 60, "/readyz of the controller in the image")
        manifest = isvc_manifest("svc", namespace, FAST_POLL)
        await kubectl(control_plane, "apply", "-f", "-", input=manifest)
        await place(control_plane, "svc", namespace, {c: r.url for c, r in reporters.items()})

        async def polled_map() -> dict[str, object] | None:
            tmap = await get_map(control_plane, "svc", namespace)
            if tmap is None:
                return None
            entries = tmap.get("spec", {}).get("entries", [])
            seen = {(e["capacity"].get("source"), e["capacity"].get("reported")) for e in entries}
            return tmap if len(entries) == 2 and seen == {("Endpoint", 1)} else None

        tmap = await eventually(polled_map, 60, "a TrafficMap capped at the reported capacity")
        log = (tmp_path / "controller.log").read_text()
        assert all(r.requests > 0 for r in reporters.values()), log
        spec = tmap["spec"]
        assert isinstance(spec, dict)
        allocated = sorted(e["capacity"]["allocated"] for e in spec["entries"])
        assert allocated == [1, 1], json.dumps(tmap, indent=2)
    finally:
        code = container.stop()
        for reporter in reporters.values():
            await reporter.stop()
        await kubectl(control_plane, "delete", "namespace", namespace, "--wait=false")
    assert code == 0, (tmp_path / "controller.log").read_text()
