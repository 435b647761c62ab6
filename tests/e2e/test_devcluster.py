"""The local control plane against itself: a real kube-apiserver, etcd, kubectl and helm."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType

from ome_routing_dev.devcluster import LocalControlPlane, Tools, cache_dir, ensure_tools
from ome_routing_dev.devcluster.tools import pinned_kubernetes_version

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures"
WIDGET_CRD = FIXTURES / "crds" / "widgets.yaml"
Widget = create_namespaced_resource("e2e.ome-routing.test", "v1", "Widget", "widgets")


def a_widget(name: str, namespace: str, replicas: int = 1, max_replicas: int = 3) -> object:
    return Widget(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec={"replicas": replicas, "maxReplicas": max_replicas},
    )


@pytest.fixture(scope="session")
def widget_crd(control_plane: LocalControlPlane) -> None:
    control_plane.install_crds([WIDGET_CRD])


# -- helpers that look at the machine, not at the code under test ---------------------------


def alive(pid: int) -> bool:
    """True while any thread of `pid` runs: a zombie leader's threads may still hold sockets."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z" or threads > 1


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* shows them) of sockets listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(address)
    return found


def wait_until_gone(pids: list[int], within: float = 20.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def assert_left_nothing_behind(pids: list[int], ports: list[int], directory: Path) -> None:
    assert [p for p in pids if alive(p)] == []
    assert processes_mentioning(str(directory)) == []
    assert {port: listening_addresses(port) for port in ports} == {port: set() for port in ports}


# -- lifecycle ------------------------------------------------------------------------------


class TestLifecycle:
    def test_the_server_reports_the_pinned_release(self, control_plane: LocalControlPlane) -> None:
        pinned = pinned_kubernetes_version()
        assert pinned.startswith("v1.34.")
        assert control_plane.version == pinned
        served = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
        assert served["serverVersion"]["gitVersion"] == pinned
        assert served["serverVersion"]["gitTreeState"] == "clean"

    def test_every_port_listens_on_loopback_only(self, control_plane: LocalControlPlane) -> None:
        assert control_plane.server_url.startswith("https://127.0.0.1:")
        loopback = "0100007F"  # 127.0.0.1 in /proc/net/tcp
        for port in control_plane.ports.values():
            assert listening_addresses(port) == {loopback}

    def test_a_stopped_control_plane_leaves_no_process_port_or_directory(
        self, tools: Tools
    ) -> None:
        """Also: CRDs of the crd directory are Established before start() returns."""
        plane = LocalControlPlane(tools=tools, crd_dir=WIDGET_CRD.parent).start()
        try:
            established = plane.kubectl(
                "get", "crd", "widgets.e2e.ome-routing.test",
                "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}",
            ).stdout  # fmt: skip
            pids, ports, directory = (
                list(plane.pids.values()),
                list(plane.ports.values()),
                plane.dir,
            )
            assert all(alive(p) for p in pids) and len(pids) == 2
        finally:
            plane.stop()
        assert established == "True"
        assert_left_nothing_behind(pids, ports, directory)
        assert not directory.exists()

    def test_a_killed_parent_takes_its_control_plane_with_it(self, tmp_path: Path) -> None:
        script = (
            "import json, time\n"
            "from pathlib import Path\n"
            "from ome_routing_dev.devcluster import LocalControlPlane\n"
            f"plane = LocalControlPlane(Path({str(tmp_path)!r})).start()\n"
            "print(json.dumps({'pids': plane.pids, 'ports': plane.ports}), flush=True)\n"
            "time.sleep(600)\n"
        )
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert parent.stdout is not None
            started = json.loads(parent.stdout.readline())
            pids = list(started["pids"].values())
            assert all(alive(p) for p in pids)
        finally:
            parent.send_signal(signal.SIGKILL)
            parent.wait()
        assert wait_until_gone(pids) == []
        assert_left_nothing_behind(pids, list(started["ports"].values()), tmp_path)

    def test_dev_up_runs_in_the_background_until_dev_down(self, tmp_path: Path) -> None:
        cli = str(Path(sys.executable).parent / "ome-routing")
        directory = tmp_path / "cluster"
        up = subprocess.run(
            [cli, "dev", "up", "--dir", str(directory)], capture_output=True, text=True, timeout=300
        )
        assert up.returncode == 0, up.stderr
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines()
        )
        assert exports["KUBECONFIG"] == str(directory / "kubeconfig")
        state = json.loads((directory / "control-plane.json").read_text())
        pids = [p["pid"] for p in state["processes"]]
        try:
            # The CLI has exited; the control plane still answers.
            kubectl = Path(exports["PATH"].split(":")[0]) / "kubectl"
            namespaces = subprocess.run(
                [str(kubectl), "get", "namespaces", "-o", "name"],
                capture_output=True,
                text=True,
                env={**os.environ, "KUBECONFIG": exports["KUBECONFIG"]},
                check=True,
            ).stdout.split()
            assert "namespace/default" in namespaces
        finally:
            down = subprocess.run(
                [cli, "dev", "down", "--dir", str(directory)], capture_output=True, text=True
            )
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == f"control plane in {directory} stopped"
        assert_left_nothing_behind(pids, list(state["ports"].values()), directory)


# -- the binaries ---------------------------------------------------------------------------


class TestTools:
    def test_kubectl_and_helm_run_from_the_cache(self, tools: Tools) -> None:
        for binary in (tools.kubectl, tools.helm, tools.kube_apiserver, tools.etcd):
            assert cache_dir() in binary.parents
        kubectl = json.loads(
            subprocess.run(
                [tools.kubectl, "version", "--client", "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert kubectl["clientVersion"]["gitVersion"].startswith("v1.34.")
        helm = subprocess.run(
            [tools.helm, "version", "--short"], capture_output=True, text=True, check=True
        )
        assert helm.stdout.startswith("v4.")

    def test_installed_tools_need_neither_go_nor_npm(
        self, tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))  # no go, no npm
        assert shutil.which("go") is None and shutil.which("npm") is None
        assert ensure_tools() == tools


# -- kubectl against the server -------------------------------------------------------------


@pytest.mark.usefixtures("widget_crd")
class TestValidation:
    def test_kubectl_apply_prints_the_message_of_a_broken_validation_rule(
        self, control_plane: LocalControlPlane, namespace: str
    ) -> None:
        valid = FIXTURES / "widget-valid.yaml"
        assert control_plane.kubectl("apply", "-n", namespace, "-f", str(valid)).returncode == 0
        rejected = control_plane.kubectl(
            "apply", "-n", namespace, "-f", str(FIXTURES / "widget-over-limit.yaml"), check=False
        )
        assert rejected.returncode != 0
        assert rejected.stderr.strip() == (
            'The Widget "over-limit" is invalid: spec: Invalid value: "object": '
            "spec.replicas must not exceed spec.maxReplicas"
        )


# -- namespaces ------------------------------------------------------------------------------


@pytest.mark.usefixtures("widget_crd")
class TestNamespaces:
    async def test_deleting_a_namespace_removes_it_and_everything_in_it(
        self, control_plane: LocalControlPlane, kube_client: AsyncClient
    ) -> None:
        """No namespace controller runs, so delete_namespace() does its work."""
        created = await kube_client.create(Namespace(metadata=ObjectMeta(generateName="doomed-")))
        name = created.metadata.name
        await kube_client.create(a_widget("doomed", name))
        await kube_client.create(
            ConfigMap(metadata=ObjectMeta(name="doomed", namespace=name), data={"k": "v"})
        )

        await asyncio.to_thread(control_plane.delete_namespace, name)

        with pytest.raises(ApiError) as missing:
            await kube_client.get(Namespace, name)
        assert missing.value.status.code == 404
        everywhere = [w.metadata.namespace async for w in kube_client.list(Widget, namespace="*")]
        assert name not in everywhere
        with pytest.raises(ApiError):
            await kube_client.get(ConfigMap, "doomed", namespace=name)

    async def test_each_test_gets_its_own_active_namespace(
        self, kube_client: AsyncClient, namespace: str
    ) -> None:
        got = await kube_client.get(Namespace, namespace)
        assert got.status is not None and got.status.phase == "Active"
        assert namespace.startswith("e2e-")


# -- API semantics a controller relies on ---------------------------------------------------


@pytest.mark.usefixtures("widget_crd")
class TestApiSemantics:
    async def test_a_watch_sees_a_create(self, kube_client: AsyncClient, namespace: str) -> None:
        listed = kube_client.list(Widget, namespace=namespace)
        assert [w async for w in listed] == []
        since = listed.resourceVersion  # type: ignore[attr-defined]

        async def first_event() -> tuple[str, str]:
            async for event, obj in kube_client.watch(
                Widget, namespace=namespace, resource_version=since
            ):
                return event, obj.metadata.name
            raise AssertionError("the watch ended without an event")

        watching = asyncio.create_task(first_event())
        await kube_client.create(a_widget("watched", namespace))
        assert await asyncio.wait_for(watching, timeout=30) == ("ADDED", "watched")

    async def test_a_status_patch_leaves_spec_alone(
        self, kube_client: AsyncClient, namespace: str
    ) -> None:
        await kube_client.create(a_widget("patched", namespace, replicas=1))
        await kube_client.patch(
            Widget.Status,
            "patched",
            {"spec": {"replicas": 3}, "status": {"observedReplicas": 1}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        stored = await kube_client.get(Widget, "patched", namespace=namespace)
        assert stored.spec == {"replicas": 1, "maxReplicas": 3}
        assert stored.status == {"observedReplicas": 1}

    async def test_an_update_with_a_stale_resource_version_is_a_conflict(
        self, kube_client: AsyncClient, namespace: str
    ) -> None:
        stale = await kube_client.create(a_widget("contended", namespace, replicas=1))
        fresh = await kube_client.get(Widget, "contended", namespace=namespace)
        fresh.spec["replicas"] = 2
        await kube_client.replace(fresh)
        stale.spec["replicas"] = 3
        with pytest.raises(ApiError) as conflict:
            await kube_client.replace(stale)
        assert conflict.value.status.code == 409
        stored = await kube_client.get(Widget, "contended", namespace=namespace)
        assert stored.spec["replicas"] == 2

    async def test_a_lease_can_be_created_and_renewed(
        self, kube_client: AsyncClient, namespace: str
    ) -> None:
        # A MicroTime must carry microseconds: the server rejects "...:05Z".
        acquired = datetime.now(UTC).replace(microsecond=250000)
        lease = await kube_client.create(
            Lease(
                metadata=ObjectMeta(name="leader", namespace=namespace),
                spec=LeaseSpec(
                    holderIdentity="replica-a",
                    leaseDurationSeconds=15,
                    acquireTime=acquired,
                    renewTime=acquired,
                    leaseTransitions=0,
                ),
            )
        )
        assert lease.spec is not None and lease.metadata is not None
        created_version = lease.metadata.resourceVersion
        lease.spec.renewTime = acquired + timedelta(seconds=5)
        renewed = await kube_client.replace(lease)
        assert renewed.spec is not None and renewed.metadata is not None
        assert renewed.spec.holderIdentity == "replica-a"
        assert renewed.spec.renewTime is not None
        assert renewed.spec.renewTime == acquired + timedelta(seconds=5)
        assert renewed.metadata.resourceVersion != created_version
