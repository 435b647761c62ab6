"""The chart's grant on ShadowTrafficMaps is enough, and every verb of it is used.

With `crds.shadowTrafficMap.install: true`, the chart's ClusterRole grants `get`,
`create`, `patch` and `delete` on `shadowtrafficmaps`. The controller runs as the chart's
ServiceAccount (a token from the TokenRequest API, as in test_rbac), creates a service's
ShadowTrafficMap, applies its changes and deletes it when the annotation goes; the API
server's audit log of that run shows a request for each of the four verbs, and no other
on the kind. (A server-side apply that creates needs `create` too, and is logged as
`patch`: the controller creates, so that each granted verb is one it requests.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from controller_harness import ControllerProcess, Reporter, eventually, get_map, kubectl
from test_rbac import SERVICE_ACCOUNT, chart_rbac, token_kubeconfig
from tests.rbac_audit import exercised, granted

from ome_routing.cli.controller import LEASE_NAME
from ome_routing.core.shadow import ANNOTATION
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(180)

POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 3,
    "quorum": 2,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "10s",
}
ROUTING_ON = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}
KIND = ("routing.ome-routing.io", "shadowtrafficmaps")


async def test_the_charts_shadow_grant_is_enough_and_each_verb_is_used(
    control_plane: LocalControlPlane, namespace: str, audit_log: Path, tmp_path: Path
) -> None:
    release = f"ome-rbac-{uuid.uuid4().hex[:6]}"
    await kubectl(control_plane, "create", "namespace", release)
    rbac = chart_rbac(control_plane, release, "--set", "crds.shadowTrafficMap.install=true")
    await kubectl(control_plane, "apply", "-f", "-", input=rbac)
    reporter = await Reporter(servable=2).start()
    process: ControllerProcess | None = None
    username = f"system:serviceaccount:{release}:{SERVICE_ACCOUNT}"
    try:
        token = (
            await kubectl(
                control_plane, "create", "token", SERVICE_ACCOUNT, "-n", release, "--duration=1h"
            )
        ).stdout.strip()
        config = token_kubeconfig(control_plane, token, tmp_path / "controller.kubeconfig")
        shadow = {"capacity": {**POLL, "quorum": 1}}
        manifest = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": "svc",
                "namespace": namespace,
                "annotations": {ANNOTATION: json.dumps(shadow)},
            },
            "spec": {
                "model": {"name": "svc"},
                "placement": {"policy": "ClusterAffinity", "mode": "All"},
                "routing": {"capacity": POLL},
            },
        }
        await kubectl(control_plane, "apply", "-f", "-", input=json.dumps(manifest))
        candidates = [
            {
                "cluster": "worker-a",
                "phase": "Admitted",
                "endpoint": reporter.url,
                "admittedReplicas": 4,
                "readyReplicas": 4,
            }
        ]
        await kubectl(
            control_plane, "patch", "inferenceservice", "svc", "-n", namespace,
            "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"placement": {"phase": "Placed", "candidates": candidates}}}),
        )  # fmt: skip
        process = ControllerProcess(
            config, ROUTING_ON, tmp_path, lease=LEASE_NAME, namespace=release
        ).start()
        await process.wait_started(timeout=60)

        def shadow_ceiling(ceiling: int) -> Callable[[], Awaitable[bool]]:
            async def seen() -> bool:
                result = await kubectl(
                    control_plane, "get", "shadowtrafficmap", "svc", "-n", namespace,
                    "-o", "json", check=False,
                )  # fmt: skip
                if result.returncode != 0:
                    return False
                entries = json.loads(result.stdout).get("status", {}).get("entries") or []
                return [e["capacity"].get("reported") for e in entries] == [ceiling]

            return seen

        await eventually(
            shadow_ceiling(2), 60, "the ShadowTrafficMap, created as the ServiceAccount"
        )
        reporter.servable = 1
        await eventually(
            shadow_ceiling(1), 60, "the ShadowTrafficMap, applied as the ServiceAccount"
        )
        await kubectl(
            control_plane, "annotate", "inferenceservice", "svc", "-n", namespace, f"{ANNOTATION}-"
        )

        async def gone() -> bool:
            result = await kubectl(
                control_plane, "get", "shadowtrafficmap", "svc", "-n", namespace, check=False
            )
            return result.returncode != 0 and "NotFound" in result.stderr

        await eventually(gone, 60, "the ShadowTrafficMap deleted as the ServiceAccount")
        assert await get_map(control_plane, "svc", namespace) is not None
        assert "forbidden" not in process.log.lower(), process.log
        assert "write ShadowTrafficMap" not in process.log, process.log
    finally:
        if process is not None:
            await process.stop()
        await reporter.stop()
        await kubectl(control_plane, "delete", "-f", "-", input=rbac, check=False)
        await kubectl(control_plane, "delete", "namespace", release, "--wait=false", check=False)

    grants = {g for g in granted(rbac) if g[:2] == KIND}
    used = {u for u in exercised(audit_log, username) if u[:2] == KIND}
    assert grants == {(*KIND, verb) for verb in ("get", "create", "patch", "delete")}
    assert used == grants
