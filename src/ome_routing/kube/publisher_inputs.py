"""What the publisher reads of a map and its InferenceService before it plans.

`owner_problem` is OME's owner check (step 3 of the publisher's order), `intent_problem`
the placement-intent part of OME's `publisherOwnerActive` (step 4), `source` and
`options` the parts of the InferenceService a plan takes, and `withdrawn` whether a
map already records a finished withdrawal of a plan, so that it is not redone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.config import OperatorConfig
from ome_routing.core.intent import validate_placement_intent
from ome_routing.core.placement import PlacementIntentError, accepted_plan
from ome_routing.core.publication import Publication, Source
from ome_routing.core.publication_status import FINALIZER, Reason, claims_of
from ome_routing.core.quoting import quote
from ome_routing.kube.resources import API_VERSION
from ome_routing.kube.watching import RawObject


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


#: OME's sentinel errors (`endpoint/trafficmap_publisher.go@2af192b3`), which its log
#: lines put in front of the detail.
OWNER_INVALID = "TrafficMap owner binding is invalid"
OWNER_READ = "TrafficMap owner state read failed"
SOURCE_CHANGED = "TrafficMap source provenance changed during reconciliation"


def owner_problem(tmap: RawObject, isvc: RawObject | None, config: OperatorConfig) -> str | None:
    """Why the map's owner can't be trusted, in OME's words (for the log), or None.

    OME's `readTrafficMapOwner` in its order: the controller reference, the names, the
    owner itself, its UID, then `status.sourceUID` (`validatePublisherSourceUID`: a new
    map whose first routing status is not written yet is refused too, `source UID is not
    established`), then the generation the map observed.
    """
    fields = meta(tmap)
    name = fields.get("name")
    key = f"{fields.get('namespace')}/{name}"
    refs = [r for r in fields.get("ownerReferences") or [] if r.get("controller")]
    ref = refs[0] if refs else {}
    if (
        ref.get("apiVersion") != API_VERSION
        or ref.get("kind") != "InferenceService"
        or not ref.get("name")
        or not ref.get("uid")
    ):
        return (
            f"{OWNER_INVALID}: TrafficMap {key} has no valid InferenceService controller reference"
        )
    owner = str(ref.get("name"))
    if name != owner:
        return f"{OWNER_INVALID}: TrafficMap name {quote(str(name))} does not match owner name {quote(owner)}"
    service = (tmap.get("spec") or {}).get("service")
    if service != owner:
        return (
            f"{OWNER_INVALID}: TrafficMap service {quote(str(service or ''))} does not match "
            f"owner name {quote(owner)}"
        )
    if isvc is None:
        return (
            f"{OWNER_READ}: read TrafficMap owner {fields.get('namespace')}/{owner}: "
            f'inferenceservices.ome.io "{owner}" not found'
        )
    uid = str(meta(isvc).get("uid") or "")
    if ref.get("uid") != uid:
        return (
            f"{OWNER_INVALID}: TrafficMap {key} owner UID {quote(str(ref.get('uid')))} does not "
            f"match InferenceService UID {quote(uid)}"
        )
    source_uid = str((tmap.get("status") or {}).get("sourceUID") or "")
    if not source_uid:
        return f"{SOURCE_CHANGED}: TrafficMap {key} source UID is not established"
    if source_uid != uid:
        return (
            f"{SOURCE_CHANGED}: TrafficMap {key} source UID {quote(source_uid)} does not match "
            f"InferenceService UID {quote(uid)}"
        )
    observed = (tmap.get("spec") or {}).get("observedISVCGeneration") or 0
    generation = meta(isvc).get("generation") or 0
    if observed != generation:
        return (
            f"{OWNER_INVALID}: TrafficMap observed InferenceService generation {observed} "
            f"does not match owner generation {generation}"
        )
    return None


def intent_problem(isvc: RawObject) -> str | None:
    """Why OME's `publisherOwnerActive` finds a routed owner inactive: its placement intent
    fails `ValidatePlacementIntent` (an obsolete selector annotation, a plan without
    `ClusterAffinity`, a bad `spec.placement`). None when the intent is valid."""
    status = isvc.get("status") or {}
    try:
        validate_placement_intent(
            meta(isvc), isvc.get("spec") or {}, accepted_plan(status) is not None
        )
    except PlacementIntentError as err:
        return str(err)
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
