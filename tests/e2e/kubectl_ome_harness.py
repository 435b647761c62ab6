"""Test parts for `kubectl ome` through the real kubectl, on the local control plane.

The plugin is a `kubectl-ome` script first on PATH, so `kubectl ome ...` finds it as kubectl
finds any plugin. InferenceServices and TrafficMaps are written directly (no controller
runs): a map carries its service's controller reference, as the controller writes it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import AsyncClient
from lightkube.types import PatchType

from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane

STAMP = "2026-09-28T10:00:00Z"


@pytest.fixture(scope="module")
def plugin_env(
    control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The control plane's environment with a `kubectl-ome` script first on PATH."""
    bin_dir = tmp_path_factory.mktemp("plugin-bin")
    script = bin_dir / "kubectl-ome"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ome_routing.cli.kubectl_ome "$@"\n')
    script.chmod(0o755)
    env = control_plane.env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def kubectl_ome(
    plane: LocalControlPlane,
    env: dict[str, str],
    *args: str,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(plane.tools.kubectl), "ome", *args],
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def run_ome(
    plane: LocalControlPlane, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl_ome, plane, env, *args)


def field_values(table: str, field: str) -> list[str]:
    """The VALUE cells of every row named `field` in a FIELD/VALUE table."""
    lines = table.splitlines()
    column = lines[0].index("VALUE")
    return [line[column:] for line in lines[1:] if line[:column].rstrip() == field]


def a_condition(kind: str, status: str, reason: str, generation: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"{kind} is {status}",
        "observedGeneration": generation,
        "lastTransitionTime": STAMP,
    }


async def create_isvc(
    client: AsyncClient,
    namespace: str,
    name: str,
    homes: tuple[str, ...] = ("worker-a", "worker-b"),
    annotations: dict[str, str] | None = None,
) -> str:
    """A placed InferenceService (mode All) with one admitted candidate per home; its UID."""
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {
            "model": {"name": name},
            "placement": {
                "policy": "ClusterAffinity",
                "mode": "All",
                "clusterAffinity": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": list(homes)}
                        ]
                    }
                ],
            },
        },
    }
    created = await client.create(InferenceService.from_dict(body))
    candidates = [
        {
            "cluster": home,
            "phase": "Admitted",
            "endpoint": f"https://{name}.{home}.example.com/v1",
            "admittedReplicas": 2,
            "readyReplicas": 2,
        }
        for home in homes
    ]
    await client.patch(
        InferenceService.Status,
        name,
        {"status": {"placement": {"phase": "Placed", "candidates": candidates}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    return str(created.metadata.uid)


async def create_trafficmap(
    client: AsyncClient,
    namespace: str,
    name: str,
    owner_uid: str,
    entries: list[dict[str, Any]],
    conditions: list[tuple[str, str, str]] | None = None,
) -> int:
    """A TrafficMap the InferenceService `owner_uid` controls, with its status; its generation."""
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"service": name, "mode": "All", "observedISVCGeneration": 1, "entries": entries},
    }
    created = await client.create(TrafficMap.from_dict(body))
    generation = int(created.metadata.generation)
    kinds = conditions or [
        ("Routable", "True", "Routable"),
        ("OverrideActive", "False", "NoOverrides"),
        ("CapacityFallback", "True", "EndpointCapacityUnavailable"),
    ]
    status = {"conditions": [a_condition(kind, s, r, generation) for kind, s, r in kinds]}
    await client.patch(
        TrafficMap.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
    )
    return generation


def token_kubeconfig(plane: LocalControlPlane, token: str, path: Path, namespace: str) -> Path:
    """The admin kubeconfig's cluster, with a user that has nothing but `token`."""
    admin: dict[str, Any] = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "reader", "user": {"token": token}}],
        "contexts": [
            {
                "name": "reader",
                "context": {"cluster": cluster["name"], "user": "reader", "namespace": namespace},
            }
        ],
        "current-context": "reader",
    }
    path.write_text(yaml.safe_dump(config))
    return path
