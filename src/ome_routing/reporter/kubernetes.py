"""`ome-routing reporter --kubernetes`: one reporter for every InferenceService of a cluster.

It watches the workload cluster's pods and InferenceServices (`view`), counts each
service's replicas that can serve (`counting`), optionally checks their model servers
(`healthchecks`), and answers polls in the `Report` format at the three URL shapes of
OME's capacity-polling guide (`urls`):

- 200 with `{"servable": N, "observedAt": ...}` for a service it has counted; the stamp
  follows `stamping`: while the view is broken or health rounds stop, the last count is
  served with its old stamp, so the controller drops the ceiling within `maxAge`;
- 404 for a service it doesn't know (the controller shows `capacity endpoint returned
  HTTP 404`);
- 503 before its first list of the cluster, and for a service it has never counted.

It also serves `/metrics` (`reportmetrics`), `/healthz`, and `/readyz` (200 once both
informers have listed).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web
from lightkube import AsyncClient

from ome_routing.kube.watching import ObjectKey, RawObject
from ome_routing.reporter.counting import (
    PodView,
    ServiceKey,
    has_decoder,
    health_targets,
    pod_view,
    servable,
)
from ome_routing.reporter.healthchecks import HealthChecks
from ome_routing.reporter.reportmetrics import ReporterMetrics
from ome_routing.reporter.server import render_report
from ome_routing.reporter.stamping import Count, Freshness, refresh, stamp
from ome_routing.reporter.urls import ServiceIndex, service_for
from ome_routing.reporter.view import ClusterView

log = logging.getLogger(__name__)

NOT_LISTED = "the reporter has not listed the cluster's pods and InferenceServices yet"


@dataclass(frozen=True)
class HealthSettings:
    """`--health-path` and its companions; see `healthchecks`."""

    path: str
    timeout: float
    period: float
    concurrency: int = 16


def _wall_clock() -> datetime:
    return datetime.now(UTC)


class KubernetesReporter:
    def __init__(
        self,
        client: AsyncClient,
        *,
        poll_path: str = "/capacity",
        health: HealthSettings | None = None,
        default_port: int = 8080,
        watch_idle_timeout: float = 30.0,
        clock: Callable[[], datetime] = _wall_clock,
    ) -> None:
        if not poll_path.startswith("/"):
            raise ValueError(f"path {poll_path!r} must start with /")
        self.poll_path = poll_path
        self._clock = clock
        self._default_port = default_port
        self.view = ClusterView(
            client, self._pod_changed, self._isvc_changed, idle_timeout=watch_idle_timeout
        )
        #: the count each service is served with
        self.counts: dict[ServiceKey, Count] = {}
        self.metrics = ReporterMetrics(lambda: self.counts, clock)
        self.health: HealthChecks | None = None
        if health is not None:
            self.health = HealthChecks(
                health.path,
                timeout=health.timeout,
                period=health.period,
                concurrency=health.concurrency,
                clock=clock,
                on_result=self.metrics.checked,
                on_round=self._health_changed,
            )
        #: each service's pods, kept up to date event by event
        self._pods: dict[ServiceKey, dict[ObjectKey, PodView]] = {}
        #: each service's figure, worked out again only when its inputs changed
        self._figures: dict[ServiceKey, int] = {}
        self._stale: set[ServiceKey] = set()
        self._index: ServiceIndex | None = None

    # -- the view and the figures ------------------------------------------------------------

    def _pod_changed(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        if old is not None:
            gone = pod_view(old, self._default_port)
            if gone is not None:
                pods = self._pods.get(gone.service_key, {})
                pods.pop(key, None)
                if not pods:
                    self._pods.pop(gone.service_key, None)
                self._stale.add(gone.service_key)
        if new is not None:
            view = pod_view(new, self._default_port)
            if view is not None:
                self._pods.setdefault(view.service_key, {})[key] = view
                self._stale.add(view.service_key)

    def _isvc_changed(self, key: ObjectKey, _: RawObject | None, new: RawObject | None) -> None:
        self._index = None
        self._stale.add(key)
        if new is None and key in self.counts:
            del self.counts[key]
            self.metrics.forget(key)

    def _health_changed(self) -> None:
        """A health round completed: every figure may have changed."""
        self._figures.clear()

    def index(self) -> ServiceIndex:
        if self._index is None:
            self._index = ServiceIndex.of(self.view.isvcs.cache.values())
        return self._index

    def figure(self, key: ServiceKey) -> int | None:
        """The service's count from the current caches and health results; None if unknown."""
        isvc = self.view.isvcs.cache.get(key)
        if isvc is None:
            return None
        if key in self._stale or key not in self._figures:
            health = self.health.results if self.health is not None else None
            pods = self._pods.get(key, {}).values()
            self._figures[key] = servable(pods, has_decoder(isvc), health)
            self._stale.discard(key)
        return self._figures[key]

    def freshness(self) -> Freshness:
        health = self.health
        return Freshness(
            view_live=self.view.live,
            health_on=health is not None,
            health_round_at=health.round_started_at if health is not None else None,
        )

    def count(self, key: ServiceKey) -> Count | None:
        """The count to serve for `key`: refreshed when its inputs are live, else the last."""
        observed_at = stamp(self.freshness(), self._clock())
        if observed_at is not None:
            figure = self.figure(key)
            if figure is None:
                return None
            counted = refresh(self.counts.get(key), figure, observed_at)
            if counted is not None:
                self.counts[key] = counted
        return self.counts.get(key)

    def health_targets(self) -> dict[str, str] | None:
        if not self.view.live:
            return None
        return health_targets(pod for pods in self._pods.values() for pod in pods.values())

    # -- HTTP ------------------------------------------------------------------------------

    def answer(self, host: str, path: str) -> web.Response:
        if not self.view.synced:
            return web.Response(status=503, text=NOT_LISTED)
        key = service_for(self.index(), host, path, self.poll_path)
        if key is None:
            return web.Response(status=404, text="no InferenceService answers at this URL")
        count = self.count(key)
        if count is None:
            return web.Response(status=503, text=f"no count yet for {key[0]}/{key[1]}")
        self.metrics.served(key, count)
        return web.Response(
            body=render_report(count.servable, count.observed_at),
            content_type="application/json",
        )

    def app(self) -> web.Application:
        async def report(request: web.Request) -> web.Response:
            if request.method not in ("GET", "POST"):
                return web.Response(status=405, headers={"Allow": "GET, POST"})
            return self.answer(request.host, request.path)

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            if self.view.synced:
                return web.Response(text="ok")
            return web.Response(status=503, text=NOT_LISTED)

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(
                body=self.metrics.exposition(), content_type="text/plain", charset="utf-8"
            )

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/metrics", metrics)
        app.router.add_route("*", "/{tail:.*}", report)
        return app

    async def run(self) -> None:
        """Watch and check until cancelled."""
        tasks = [self.view.pods.run(), self.view.isvcs.run()]
        if self.health is not None:
            tasks.append(self.health.run(self.health_targets))
        await asyncio.gather(*tasks)


async def serve(
    reporter: KubernetesReporter,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Serve `reporter` on `host:port` until cancelled; HTTPS with `ssl_context`."""
    runner = web.AppRunner(reporter.app(), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
        # the port bound, which `--port 0` leaves to the system
        bound = next((a[1] for a in runner.addresses if isinstance(a, tuple)), port)
        scheme = "http" if ssl_context is None else "https"
        log.info("reporting on %s://%s:%d", scheme, host, bound)
        await reporter.run()
    finally:
        await runner.cleanup()
