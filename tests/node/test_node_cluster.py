"""The one-node Kubernetes itself: pods of our image, in-cluster access, logs, exec, and a
`dev up --node` / `dev down` that leaves the host as it found it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from host_state import HostState
from pods import get, python_pod, ready_pods, wait_for

from ome_routing_dev.devcluster import LocalControlPlane
from ome_routing_dev.devcluster.node import LocalNode

# The pod asks the API server who it is, through the `kubernetes` Service, as in-cluster
# clients do: the Service's address from the environment, the token and CA the kubelet
# mounted from the pod's service account.
WHOAMI = """
import json, os, ssl, time, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
host = os.environ["KUBERNETES_SERVICE_HOST"]
port = os.environ["KUBERNETES_SERVICE_PORT"]
request = urllib.request.Request(
    f"https://{host}:{port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
    data=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode(),
    headers={"Authorization": "Bearer " + open(sa + "/token").read(),
             "Content-Type": "application/json"},
)
context = ssl.create_default_context(cafile=sa + "/ca.crt")
with urllib.request.urlopen(request, context=context, timeout=10) as answer:
    review = json.load(answer)
print(host, port, review["status"]["userInfo"]["username"], flush=True)
time.sleep(3600)
"""


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service_with_its_token(
    plane: LocalControlPlane, namespace: str
) -> None:
    plane.kubectl("apply", "-f", "-", input=python_pod("whoami", namespace, WHOAMI))
    plane.kubectl("wait", "--for=condition=Ready", "pod/whoami", "-n", namespace, "--timeout=90s")
    logs = wait_for(
        "the pod's answer in kubectl logs",
        lambda: plane.kubectl("logs", "whoami", "-n", namespace).stdout.strip(),
    )
    service = get(plane, "service", "kubernetes", "-n", "default")
    assert logs.split() == [
        service["spec"]["clusterIP"],
        "443",
        f"system:serviceaccount:{namespace}:default",
    ]


def test_exec_runs_in_the_container_as_the_restricted_security_context_says(
    plane: LocalControlPlane, namespace: str
) -> None:
    sleeper = "import time; time.sleep(3600)"
    plane.kubectl("apply", "-f", "-", input=python_pod("sleeper", namespace, sleeper))
    plane.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "-n", namespace, "--timeout=90s")
    probe = (
        "import os\n"
        "status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)\n"
        "try:\n"
        "    open('/written', 'w')\n"
        "    root = 'writable'\n"
        "except OSError as error:\n"
        "    root = os.strerror(error.errno)\n"
        "print(os.getuid(), os.getgid(), status['CapEff'].strip(), status['NoNewPrivs'].strip(), root)\n"
    )
    result = plane.kubectl("exec", "sleeper", "-n", namespace, "--", "python3.11", "-c", probe)
    assert result.stdout.split(maxsplit=4) == [
        "65532", "65532", "0000000000000000", "1", "Read-only file system\n",
    ]  # fmt: skip


def test_a_deployment_becomes_ready_pods_and_a_deleted_pod_is_replaced(
    plane: LocalControlPlane, namespace: str
) -> None:
    plane.kubectl(
        "create", "deployment", "sleepers", "-n", namespace, "--image=ome-routing:0.1.0",
        "--replicas=2", "--", "python3.11", "-c", "import time; time.sleep(3600)",
    )  # fmt: skip
    first = wait_for(
        "2 Ready pods",
        lambda: (p := ready_pods(plane, namespace, "app=sleepers")) and len(p) == 2 and p,
    )
    plane.kubectl("delete", "pod", first[0], "-n", namespace, "--wait=false")
    after = wait_for(
        "a replacement",
        lambda: (
            (p := ready_pods(plane, namespace, "app=sleepers"))
            and len(p) == 2
            and first[0] not in p
            and p
        ),
    )
    assert first[1] in after


def _dev(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "ome-routing"), "dev", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_dev_up_node_and_dev_down_leave_the_host_as_it_was(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    before = HostState.now(directory)
    up = _dev("up", "--node", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    try:
        env = dict(line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines())
        kubectl = Path(env["PATH"].split(":")[0]) / "kubectl"
        nodes = subprocess.run(
            [str(kubectl), "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
            env={**os.environ, "KUBECONFIG": env["KUBECONFIG"]},
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert nodes.stdout == "local-node"
        assert HostState.now(directory).processes, "no process of the node was found running"
    finally:
        down = _dev("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert HostState.now(directory) == before


def test_a_start_that_fails_half_way_leaves_the_host_as_it_was(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    broken = tmp_path / "broken.tar"
    broken.write_bytes(b"not an image archive")
    before = HostState.now(directory)
    with pytest.raises(RuntimeError, match="ctr images import"):
        LocalNode(directory, images=[broken]).start()
    assert HostState.now(directory) == before
