"""The demo's homes served by one Kubernetes-backed reporter (`ome-routing demo --kubernetes-reporter`).

Instead of a fixed count per home, the local control plane also plays both workload
clusters: the service's copy on each home is an InferenceService in a namespace named after
the home (`worker-a/qwen3-0-6b`), with Pod objects whose Ready condition the demo sets
(worker-a: 3 Ready pods; worker-b: 1 Ready and 1 not Ready). One `reporter.kubernetes`
reporter watches them and answers each home's poll at its shared-host URL,
`/<home>/<name>/capacity`, so the counts come from the pods, as on a real workload cluster.

`route_to_model_server()` makes one home's URLs answer 404, as `LoopbackReporters` does.
Each home's `/<home>/<name>/v1/models` stands in for its model server's health path, for
the health probe steps: 200 until the demo switches `health`.
The reporter runs on an event loop in a daemon thread and binds only 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, Self, TypeVar

import yaml
from aiohttp import web
from lightkube import AsyncClient, KubeConfig

from ome_routing.reporter.health import SwitchableHealth, health_handler
from ome_routing.reporter.kubernetes import KubernetesReporter
from ome_routing_dev.devcluster import LocalControlPlane

POLL_PATH = "/capacity"
#: The model server's path that health probes ask, under each home's endpoint.
HEALTH_PATH = "/v1/models"
_T = TypeVar("_T")
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class KubernetesHome:
    """One home: its endpoint on the shared reporter, and a switch to the model server's 404."""

    def __init__(self, name: str, service: str, servable: int) -> None:
        self.name = name
        self.service = service
        self.servable = servable
        self.base = ""
        self.missed = threading.Event()
        #: the model server's answer at `health_path`, switched while the demo runs
        self.health = SwitchableHealth()
        self.answer_health = health_handler(self.health)

    @property
    def health_path(self) -> str:
        return f"/{self.name}/{self.service}{HEALTH_PATH}"

    @property
    def endpoint(self) -> str:
        return f"{self.base}/{self.name}/{self.service}/"

    @property
    def poll_url(self) -> str:
        return f"{self.base}/{self.name}/{self.service}{POLL_PATH}"

    def route_to_model_server(self) -> None:
        self.missed.set()


def home_manifests(home: str, service: str, ready: int) -> str:
    """The service's copy on `home`, with `ready` Ready pods and one that is not."""
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": home}},
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": service, "namespace": home},
            "spec": {"model": {"name": service}},
        },
    ]
    for i in range(ready + 1):
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{service}-engine-{i}",
                    "namespace": home,
                    "labels": {"ome.io/inferenceservice": service, "component": "engine"},
                },
                "spec": {
                    "nodeName": f"{home}-node",
                    "containers": [{"name": "ome-container", "image": "model-server"}],
                },
            }
        )
    return yaml.safe_dump_all(documents)


def ready_patch(ready: bool) -> str:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return json.dumps({"status": {"phase": "Running", "conditions": [condition]}})


class KubernetesReporters:
    """The homes' pods on the control plane, and one Kubernetes-backed reporter for all."""

    def __init__(self, plane: LocalControlPlane, service: str, counts: dict[str, int]) -> None:
        self._plane = plane
        self._homes = {name: KubernetesHome(name, service, n) for name, n in counts.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._kube: AsyncClient | None = None

    def __getitem__(self, name: str) -> KubernetesHome:
        return self._homes[name]

    def __iter__(self) -> Iterator[KubernetesHome]:
        return iter(self._homes.values())

    def create_pods(self) -> None:
        for home in self._homes.values():
            self._plane.kubectl(
                "apply", "-f", "-", input=home_manifests(home.name, home.service, home.servable)
            )
            for i in range(home.servable + 1):
                self._plane.kubectl(
                    "patch", "pod", f"{home.service}-engine-{i}", "-n", home.name,
                    "--subresource=status", "--type=merge", "-p", ready_patch(i < home.servable),
                )  # fmt: skip

    def start(self) -> Self:
        self.create_pods()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="demo-reporter", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._call(self._start())
        except BaseException:
            self.close()
            raise
        return self

    async def _start(self) -> None:
        config = KubeConfig.from_file(self._plane.kubeconfig)
        self._kube = AsyncClient(config=config, trust_env=False)
        reporter = KubernetesReporter(self._kube, poll_path=POLL_PATH)
        app = reporter.app()

        @web.middleware
        async def model_server(request: web.Request, handler: _Handler) -> web.StreamResponse:
            home = self._homes.get(request.path.split("/")[1] if "/" in request.path else "")
            if home is not None and request.path == home.health_path:
                return await home.answer_health(request)
            if home is not None and home.missed.is_set():
                return web.Response(status=404, text="404 page not found\n")
            return await handler(request)

        app.middlewares.append(model_server)
        self._task = asyncio.get_running_loop().create_task(reporter.run())
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runner = runner
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        for home in self._homes.values():
            home.base = base
        for _ in range(200):  # both informers listed: the reporter can answer
            if reporter.view.synced:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the reporter did not list the control plane's pods within 10s")

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._kube is not None:
            await self._kube.close()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._call(self._stop())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            if not thread.is_alive():
                loop.close()
            self._loop = self._thread = None

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=15)
