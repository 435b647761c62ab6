"""Helpers of the CRD tests: apply a manifest with the real kubectl, read an object back."""

from __future__ import annotations

import json
from typing import Any

import yaml

from ome_routing_dev.devcluster import LocalControlPlane


def apply(plane: LocalControlPlane, manifest: dict[str, Any]) -> tuple[int, str]:
    """`kubectl apply` of one manifest: the exit code and everything kubectl printed."""
    result = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    return result.returncode, result.stdout + result.stderr


def assert_applied(code: int, output: str) -> None:
    assert code == 0, output
    assert output.strip().endswith(("created", "configured", "unchanged")), output


def get(plane: LocalControlPlane, kind: str, namespace: str, name: str = "svc") -> dict[str, Any]:
    out = plane.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    loaded: dict[str, Any] = json.loads(out)
    return loaded
