"""The reporter's view of a workload cluster: its pods of InferenceServices and the services.

Two informers (`kube.watching`: list, then watch, relist on any error) keep the caches.
The view is live while both are watching after a successful list; a dropped watch, an
API server that went away, a watch idle for `idle_timeout` (it may be silently dead) or a
failed relist make it not live until the next list succeeds. The caches are kept meanwhile, so the last figures can still be served, but not
re-stamped (`stamping`).

Only pods with OME's `ome.io/inferenceservice` label are listed and watched, and the
caches keep only what the counting rules read (`pod_fields`, `isvc_fields`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from lightkube import AsyncClient
from lightkube import operators as op
from lightkube.resources.core_v1 import Pod

from ome_routing.kube.resources import InferenceService
from ome_routing.kube.watching import Informer, ObjectKey, OnEvent, RawObject, compact
from ome_routing.reporter.counting import ISVC_LABEL, PROBE_PORT_ANNOTATION

log = logging.getLogger(__name__)


def pod_fields(raw: RawObject) -> RawObject:
    """What the cache keeps of a pod: what `counting.pod_view` reads."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    annotations = meta.get("annotations") or {}
    containers = spec.get("containers") or []
    kept: RawObject = {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": meta.get("labels") or {},
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "status": {
            "podIP": status.get("podIP"),
            "conditions": [c for c in status.get("conditions") or () if c.get("type") == "Ready"],
        },
    }
    if PROBE_PORT_ANNOTATION in annotations:
        kept["metadata"]["annotations"] = {
            PROBE_PORT_ANNOTATION: annotations[PROBE_PORT_ANNOTATION]
        }
    if containers:
        kept["spec"] = {"containers": [{"ports": containers[0].get("ports") or []}]}
    return cast(RawObject, compact(kept))


def isvc_fields(raw: RawObject) -> RawObject:
    """What the cache keeps of an InferenceService: its name, decoder, and `status.url`."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    kept: RawObject = {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "spec": {"decoder": {}} if isinstance(spec, dict) and spec.get("decoder") else {},
        "status": {"url": status.get("url")} if isinstance(status, dict) else {},
    }
    return cast(RawObject, compact(kept))


class LiveInformer(Informer):
    """An informer that says whether it is watching now, after a successful list.

    A watch whose connection dies without a word (a network partition, an API server that
    hangs) would stay "watching" for ever; so a watch that brings no event for
    `idle_timeout` seconds ends, and the informer lists again. On a quiet cluster that is
    one list every `idle_timeout`; a dead connection is found within it.
    """

    live = False

    def __init__(self, *args: Any, idle_timeout: float = 30.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idle_timeout = idle_timeout
        self._heard = 0.0
        told = self._on_event

        def heard(key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
            self._heard = asyncio.get_running_loop().time()
            told(key, old, new)

        self._on_event = heard

    async def _relist(self) -> str:
        self.live = False
        return await super()._relist()

    async def _watch(self, version: str) -> None:
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        watching = asyncio.ensure_future(super()._watch(version))
        self.live = True
        try:
            while not watching.done():
                idle = loop.time() - self._heard
                if idle >= self.idle_timeout:
                    log.debug("watch of %s idle for %.0fs: listing again", self.kind, idle)
                    return  # the informer lists again, as after a watch that ended
                await asyncio.wait({watching}, timeout=self.idle_timeout - idle)
            watching.result()
        finally:
            self.live = False
            if not watching.done():
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)


class ClusterView:
    """The pods and InferenceServices of one workload cluster, kept by two informers."""

    def __init__(
        self, client: AsyncClient, on_pod: OnEvent, on_isvc: OnEvent, idle_timeout: float = 30.0
    ) -> None:
        self.pods = LiveInformer(
            client,
            Pod,
            on_pod,
            namespaced=True,
            transform=pod_fields,
            # only pods that carry OME's service label
            labels={ISVC_LABEL: op.exists()},
            idle_timeout=idle_timeout,
        )
        self.isvcs = LiveInformer(
            client,
            InferenceService,
            on_isvc,
            namespaced=True,
            transform=isvc_fields,
            idle_timeout=idle_timeout,
        )

    @property
    def live(self) -> bool:
        return self.pods.live and self.isvcs.live

    @property
    def synced(self) -> bool:
        return self.pods.synced.is_set() and self.isvcs.synced.is_set()
