"""Pods of the controller image for the node tests: manifests, and waiting on them."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from ome_routing_dev.devcluster import LocalControlPlane

IMAGE = "ome-routing:0.1.0"
#: The chart's restricted pod and container security contexts.
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def python_pod(name: str, namespace: str, script: str, **spec: Any) -> str:
    """A pod running `script` with the image's Python, locked down as the chart's pods are."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "securityContext": POD_SECURITY,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python3.11", "-c", script],
                    "securityContext": CONTAINER_SECURITY,
                }
            ],
            **spec,
        },
    }
    return yaml.safe_dump(pod)


def get(plane: LocalControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)


def wait_for(what: str, check: Any, timeout: float = 90.0, interval: float = 0.25) -> Any:
    """Call `check` until it returns something true; that value. AssertionError at timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not seen within {timeout:.0f}s (last: {last!r})")


def ready_pods(plane: LocalControlPlane, namespace: str, selector: str) -> list[str]:
    """Names of the pods matching `selector` whose Ready condition is True (and not deleted)."""
    pods = get(plane, "pods", "-n", namespace, "-l", selector)["items"]
    return sorted(
        pod["metadata"]["name"]
        for pod in pods
        if "deletionTimestamp" not in pod["metadata"]
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod.get("status", {}).get("conditions", [])
        )
    )
