"""`ome-routing dev up --gateway contour|traefik`: a control plane and a gateway left running.

The gateway outlives the command, its hosts file takes the workload clusters' names, a
route published on it carries real requests, and `dev down` stops every process it started.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gw_clusters import ClusterServer, Fleet, home_host
from gw_objects import external_name_backend, fqdn_backend

from ome_routing_dev.devcluster import LocalControlPlane
from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.processes import ProcessId, free_ports

CLI = str(Path(sys.executable).parent / "ome-routing")
SERVES = re.compile(r"serves the Gateway (\S+)/(\S+) at http://127\.0\.0\.1:(\d+)")

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("kind", ["contour", "traefik"])
async def test_dev_up_leaves_a_gateway_serving_until_dev_down(
    kind: str, tmp_path: Path, fleet: Fleet
) -> None:
    directory = tmp_path / "cluster"
    up = subprocess.run(
        [CLI, "dev", "up", "--dir", str(directory), "--gateway", kind],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    state = SandboxedGateway.attached(directory / "gateway")
    try:
        assert state is not None and state["kind"] == kind
        found = SERVES.search(up.stderr)
        assert found is not None, up.stderr
        namespace, name, port = found.group(1), found.group(2), int(found.group(3))
        assert (f"{namespace}/{name}", port) == (state["gateway"], state["port"])

        # a workload cluster, its name appended to the gateway's hosts file
        (server_port,) = free_ports(1)
        host = home_host("worker-a")
        server = await ClusterServer("worker-a", fleet.address("worker-a"), server_port).start()
        with open(state["hosts_file"], "a") as hosts:
            hosts.write(f"{fleet.address('worker-a')}\t{host}\n")
        backend = (external_name_backend if kind == "contour" else fqdn_backend)(
            "tmb-worker-a", "default", host, server_port
        )
        route = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "chat-global", "namespace": "default"},
            "spec": {
                "parentRefs": [{"name": name, "namespace": namespace}],
                "hostnames": ["chat.default.global.example.com"],
                "rules": [{"backendRefs": [{"name": "tmb-worker-a", "port": server_port}]}],
            },
        }
        plane = LocalControlPlane.attach(directory)
        plane.kubectl(
            "apply", "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [*backend, route]}),
        )  # fmt: skip
        try:
            answer = await _eventually_served(port, "chat.default.global.example.com")
            assert answer == (200, "served by worker-a")
        finally:
            await server.stop()
    finally:
        down = subprocess.run(
            [CLI, "dev", "down", "--dir", str(directory)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert "gateway in" in down.stdout
    assert state is not None
    assert not any(ProcessId(**p).is_alive() for p in state["processes"])
    assert SandboxedGateway.attached(directory / "gateway") is None


async def _eventually_served(port: int, host: str) -> tuple[int, str]:
    def get() -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/", headers={"Host": host, "Connection": "close"})
            response = connection.getresponse()
            return response.status, response.read().decode()
        except OSError as error:
            return 0, str(error)
        finally:
            connection.close()

    deadline = time.monotonic() + 60
    while True:
        answer = await asyncio.to_thread(get)
        if answer[0] == 200 or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.3)
