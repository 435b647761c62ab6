"""The workload side of the demo on a real node (`ome-routing demo --node`), as manifests.

Each home's copy of the service is an InferenceService in a namespace named after the home
with a model-server Deployment: Python's http.server from the controller image, over an
emptyDir, whose readiness probe asks `/ready`. Its pods start not ready; creating
`/srv/ready` in a pod (`ready_command`, run with `kubectl exec`) makes it ready, removing
it makes it fail its probe. The pods run as the chart's do: non-root, read-only root
filesystem, no capabilities. Pure functions; `tests/node` uses them too.
"""

from __future__ import annotations

from typing import Any

import yaml

IMAGE = "ome-routing:0.1.0"
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


def engine_selector(service: str) -> str:
    return f"app={service}-engine"


def model_server(home: str, service: str, replicas: int) -> str:
    """The service's copy on `home` and its model-server Deployment (pods start not ready)."""
    labels = {"app": f"{service}-engine", "ome.io/inferenceservice": service, "component": "engine"}
    container = {
        "name": "ome-container",
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python3.11", "-m", "http.server", "8080"],
        "args": ["--directory", "/srv"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [{"name": "srv", "mountPath": "/srv"}],
    }
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": home}},
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": service, "namespace": home},
            "spec": {"model": {"name": service}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"{service}-engine", "namespace": home},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": labels["app"]}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": POD_SECURITY,
                        "terminationGracePeriodSeconds": 2,
                        "containers": [container],
                        "volumes": [{"name": "srv", "emptyDir": {}}],
                    },
                },
            },
        },
    ]
    return yaml.safe_dump_all(documents, sort_keys=False)


def ready_command(ready: bool = True) -> list[str]:
    """What `kubectl exec POD --` runs to make a model server ready, or fail its probe."""
    script = "open('/srv/ready', 'w')" if ready else "import os; os.remove('/srv/ready')"
    return ["python3.11", "-c", script]


def poll_endpoint(reporter: str, home: str, service: str) -> str:
    """A home's endpoint at the reporter (OME's shared-host scheme: /<namespace>/<name>/)."""
    return f"{reporter}/{home}/{service}/"
