"""What the publisher reads of a map and its InferenceService before it plans.

`owner_problem` is OME's owner check (step 2 of the publisher's order), `source` and
`options` the parts of the InferenceService a plan takes, and `withdrawn` whether a
map already records a finished withdrawal of a plan, so that it is not redone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.config import OperatorConfig
from ome_routing.core.publication import Publication, Source
from ome_routing.core.publication_status import FINALIZER, Reason, claims_of
from ome_routing.kube.resources import API_VERSION
from ome_routing.kube.watching import RawObject


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def owner_problem(tmap: RawObject, isvc: RawObject | None, config: OperatorConfig) -> str | None:
    """Why the map's owner can't be trusted (for the log), or None."""
    fields = meta(tmap)
    name = fields.get("name")
    refs = [r for r in fields.get("ownerReferences") or [] if r.get("controller")]
    if not refs or refs[0].get("apiVersion") != API_VERSION:
        return "TrafficMap has no InferenceService controller"
    ref = refs[0]
    if ref.get("kind") != "InferenceService" or ref.get("name") != name:
        return "TrafficMap controller is not its InferenceService"
    if (tmap.get("spec") or {}).get("service") != name:
        return "TrafficMap spec.service does not name its InferenceService"
    if isvc is None:
        return "InferenceService not found"
    uid = meta(isvc).get("uid")
    if ref.get("uid") != uid or (tmap.get("status") or {}).get("sourceUID") != uid:
        return "TrafficMap does not record its InferenceService's UID"
    if (tmap.get("spec") or {}).get("observedISVCGeneration") != meta(isvc).get("generation"):
        return "TrafficMap is stale for its InferenceService's generation"
    return None


def source(isvc: RawObject) -> Source:
    fields = meta(isvc)
    return Source(
        namespace=str(fields.get("namespace")),
        name=str(fields.get("name")),
        annotations=dict(fields.get("annotations") or {}),
        finalizers=tuple(fields.get("finalizers") or ()),
    )


def options(isvc: RawObject) -> list[str]:
    publisher = ((isvc.get("spec") or {}).get("routing") or {}).get("publisher") or {}
    options = publisher.get("options") if isinstance(publisher, Mapping) else None
    return sorted(options) if isinstance(options, Mapping) else []


def withdrawn(tmap: RawObject, plan: Publication) -> bool:
    """Whether the map records a completed withdrawal of this plan (at any generation)."""
    status = tmap.get("status") or {}
    published = [c for c in status.get("conditions") or [] if c.get("type") == "Published"]
    return (
        bool(published)
        and published[0].get("reason") == Reason.WITHDRAWN
        and claims_of(status) == [plan.claim]
        and FINALIZER in (meta(tmap).get("finalizers") or [])
    )
