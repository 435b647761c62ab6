"""Test parts for the Kubernetes-backed reporter: pods whose status a test sets, model-server
stand-ins on loopback, and `ome-routing reporter --kubernetes` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from controller_harness import eventually, kubectl

from ome_routing_dev.devcluster import LocalControlPlane

#: keeps a deleted pod terminating until the test lets it go
HOLD = "e2e.ome.io/hold"


@dataclass
class ModelServer:
    """A model server's health endpoint on loopback whose answer a test can change."""

    status: int = 200
    port: int = 0
    checks: int = 0
    _runner: web.AppRunner | None = field(default=None, repr=False)

    async def start(self) -> ModelServer:
        async def health(_: web.Request) -> web.Response:
            self.checks += 1
            return web.Response(status=self.status, text="model server")

        app = web.Application()
        app.router.add_get("/health", health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def pod_manifest(name: str, namespace: str, service: str, port: int, component: str) -> str:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"ome.io/inferenceservice": service, "component": component},
            "finalizers": [HOLD],
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [
                {
                    "name": "ome-container",
                    "image": "model-server",
                    "ports": [{"containerPort": port}],
                }
            ],
        },
    }
    return yaml.safe_dump(manifest)


async def add_pod(
    plane: LocalControlPlane,
    name: str,
    namespace: str,
    service: str,
    port: int,
    component: str = "engine",
) -> None:
    await kubectl(
        plane, "apply", "-f", "-", input=pod_manifest(name, namespace, service, port, component)
    )
    await set_ready(plane, name, namespace, True)


async def set_ready(plane: LocalControlPlane, name: str, namespace: str, ready: bool) -> None:
    status = {
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    }
    await kubectl(
        plane,
        "patch",
        "pod",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )


async def start_terminating(plane: LocalControlPlane, name: str, namespace: str) -> None:
    """Delete the pod; its finalizer keeps it, Ready and terminating."""
    await kubectl(plane, "delete", "pod", name, "-n", namespace, "--wait=false")


async def release_pods(plane: LocalControlPlane, namespace: str) -> None:
    """Remove the test's finalizer from every pod, so the namespace can go."""
    listed = await kubectl(plane, "get", "pods", "-n", namespace, "-o", "name", check=False)
    for pod in listed.stdout.split():
        await kubectl(
            plane,
            "patch",
            pod,
            "-n",
            namespace,
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            check=False,
        )


class ReporterProcess:
    """`ome-routing reporter --kubernetes` as a workload cluster runs it, in a subprocess."""

    def __init__(self, kubeconfig: Path, workdir: Path, *args: str) -> None:
        self.kubeconfig = kubeconfig
        self.port = 0  # the port it bound, from its log, once started
        self.args = args
        self.log_path = workdir / f"reporter-{uuid.uuid4().hex[:8]}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def start(self) -> ReporterProcess:
        command = [
            sys.executable,
            "-m",
            "ome_routing.cli.main",
            "reporter",
            "--kubernetes",
            "--kubeconfig",
            str(self.kubeconfig),
            "--port",
            "0",
            *self.args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

        async def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"reporter exited:\n{self.log}")
            bound = re.search(r"reporting on http://127\.0\.0\.1:(\d+)", self.log)
            if bound is None:
                return False
            self.port = int(bound.group(1))
            try:
                status, _ = await self.get("/readyz")
            except aiohttp.ClientError:
                return False
            return status == 200

        await eventually(ready, what="the reporter to list the cluster")
        return self

    async def get(self, path: str, host: str | None = None) -> tuple[int, Any]:
        headers = {"Host": host} if host else {}
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(self.url + path, headers=headers) as response,
        ):
            text = await response.text()
            if response.content_type == "application/json":
                return response.status, json.loads(text)
            return response.status, text

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                await asyncio.to_thread(self.process.wait, 20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                await asyncio.to_thread(self.process.wait, 10)
