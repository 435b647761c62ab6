"""The routing scene on the node: model servers, the reporter chart, the controller chart.

One node plays both sides, as the demo's Kubernetes-backed mode does: each home's copy of
the service is an InferenceService in a namespace named after the home, with a model-server
Deployment whose pods have a real readiness probe; one `ome-capacity-reporter` release
counts them and answers each home's poll at its shared-host URL
(`http://<reporter Service>:8080/<home>/<service>/capacity`); the control plane's
InferenceService is placed on the homes with those URLs as endpoints, and the
`ome-resources` release runs the controller, which polls them through the Service.

A model server is Python's http.server over an emptyDir, ready while `/srv/ready` exists:
pods start not ready, and `mark_ready` creates the file (`kubectl exec`), `unready`
removes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pods import get, wait_for

from ome_routing_dev.demo.nodescene import model_server, ready_command  # noqa: F401 (for the tests)
from ome_routing_dev.demo.scene import placement_status, workload_clusters_manifest
from ome_routing_dev.devcluster import LocalControlPlane

REPO = Path(__file__).resolve().parents[2]
CONTROLLER_CHART = REPO / "charts" / "ome-resources"
REPORTER_CHART = REPO / "charts" / "ome-capacity-reporter"
CONTROLLER_NAMESPACE = "ome-system"
CONTROLLER_RELEASE = "ome"
REPORTER_NAMESPACE = "ome-reporter"
REPORTER_RELEASE = "reporter"
#: A poll fast enough for a test (the e2e suite's): a new count shows after two polls.
FAST_POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 3,
    "quorum": 2,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "10s",
}


def helm(plane: LocalControlPlane, *args: str, timeout: float = 240.0) -> str:
    import subprocess

    result = subprocess.run(
        [str(plane.tools.helm), *args],
        env=plane.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr or result.stdout}"
    return result.stdout


def values_file(directory: Path, values: dict[str, Any], name: str = "values.yaml") -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(values))
    return str(path)


def routing_values(capacity: dict[str, Any] | None = None, **controller: Any) -> dict[str, Any]:
    """The guide's values (routing on), with `capacity` as the poll when given."""
    values: dict[str, Any] = yaml.safe_load((REPO / "examples" / "values.yaml").read_text())
    if capacity is not None:
        values["ome"]["multicluster"]["config"]["routing"]["capacity"] = capacity
    if controller:
        values["controller"] = controller
    return values


def engine_pods(plane: LocalControlPlane, home: str, service: str) -> list[dict[str, Any]]:
    pods = get(plane, "pods", "-n", home, "-l", f"app={service}-engine")["items"]
    return [p for p in pods if "deletionTimestamp" not in p["metadata"]]


def running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)


def mark_ready(plane: LocalControlPlane, home: str, pod: str, ready: bool = True) -> None:
    plane.kubectl("exec", pod, "-n", home, "--", *ready_command(ready))


def serve_ready(plane: LocalControlPlane, home: str, service: str, count: int) -> list[str]:
    """Wait for the Deployment's pods to run, mark `count` of them ready; their names."""
    pods = wait_for(
        f"running pods of {home}/{service}-engine",
        lambda: (found := engine_pods(plane, home, service)) and all(map(running, found)) and found,
    )
    names = sorted(p["metadata"]["name"] for p in pods)
    for name in names[:count]:
        mark_ready(plane, home, name)
    return names


def install_reporter(plane: LocalControlPlane) -> str:
    """The reporter chart with its default values; its Service's base URL."""
    helm(
        plane, "install", REPORTER_RELEASE, str(REPORTER_CHART), "-n", REPORTER_NAMESPACE,
        "--create-namespace", "--wait", "--timeout=3m",
    )  # fmt: skip
    services = get(plane, "services", "-n", REPORTER_NAMESPACE)["items"]
    (service,) = services
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"


def place(
    plane: LocalControlPlane, namespace: str, service: str, endpoints: dict[str, str]
) -> None:
    """The WorkloadClusters, and the control plane's InferenceService placed on them with
    `endpoints` (as OME's placement controller writes its status)."""
    plane.kubectl("apply", "-f", "-", input=workload_clusters_manifest(list(endpoints)))
    plane.kubectl("create", "namespace", namespace, check=False)
    isvc = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {
            "model": {"name": service},
            "runtime": {"name": f"srt-{service}"},
            "engine": {"minReplicas": 2, "maxReplicas": 2},
            "placement": {
                "policy": "ClusterAffinity",
                "mode": "All",
                "clusterAffinity": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": list(endpoints)}
                        ]
                    }
                ],
            },
        },
    }
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(isvc))
    plane.kubectl(
        "patch", "inferenceservice", service, "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps(placement_status(endpoints)),
    )  # fmt: skip


def capacity(plane: LocalControlPlane, namespace: str, name: str) -> dict[str, Any]:
    """Each home's `capacity` block in the TrafficMap, by cluster ({} while there is no map)."""
    found = plane.kubectl("get", "trafficmap", name, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return {}
    entries = json.loads(found.stdout).get("spec", {}).get("entries") or []
    return {e["cluster"]: e.get("capacity") or {} for e in entries}
