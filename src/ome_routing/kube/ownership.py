"""Whose a TrafficMap is, when routing may delete it, and whether a source changed.

OME's rules, as pure functions of raw objects:

- `has_exact_controller`: the map has at least one controller reference, and every one
  names this InferenceService exactly (`ome.io/v1beta1`, its kind, name and UID).
- `source_uid_problem`: the map records another `status.sourceUID` (OME's error text).
- `reapable`: whether routing deletes a map it no longer routes. With the service present:
  never a deleting map, only one it controls exactly or, with no controller at all, one that
  records its UID, and not while the publisher's claims wait for its finalizer to come back.
  With the service gone (confirmed by a live read): only an orphan, a map with no
  controller that records a source UID and names the service in `spec.service`; a map with
  a controller is left to the garbage collector.
- `same_snapshot`: OME's `SameSnapshot`, the fence before a spec with a plan ID is
  written: the live InferenceService is the one the spec was computed from.

Must not do I/O; the controller reads, deletes and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.publication_status import FINALIZER, claims_of
from ome_routing.core.quoting import quote
from ome_routing.kube.resources import API_VERSION
from ome_routing.kube.watching import lean

RawObject = Mapping[str, Any]

#: OME's `plan.ErrStaleSnapshot`.
STALE_SNAPSHOT = "placement source or plan changed"


def meta(obj: RawObject | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def map_key(tmap: RawObject) -> str:
    fields = meta(tmap)
    return f"{fields.get('namespace')}/{fields.get('name')}"


def _controllers(tmap: RawObject) -> list[Mapping[str, Any]]:
    refs = meta(tmap).get("ownerReferences") or []
    return [ref for ref in refs if isinstance(ref, Mapping) and ref.get("controller") is True]


def has_controller(tmap: RawObject) -> bool:
    """Any owner reference claims to be the map's controller."""
    return bool(_controllers(tmap))


def has_exact_controller(tmap: RawObject, name: str, uid: str) -> bool:
    """Some controller reference exists and every one is InferenceService `name`/`uid`."""
    controllers = _controllers(tmap)
    return (
        bool(uid)
        and bool(controllers)
        and all(
            ref.get("apiVersion") == API_VERSION
            and ref.get("kind") == "InferenceService"
            and ref.get("name") == name
            and ref.get("uid") == uid
            for ref in controllers
        )
    )


def source_uid(tmap: RawObject) -> str:
    return str((tmap.get("status") or {}).get("sourceUID") or "")


def source_uid_problem(tmap: RawObject, uid: str) -> str | None:
    """OME's error when the map records another service's UID, else None."""
    recorded = source_uid(tmap)
    if not recorded or recorded == uid:
        return None
    return (
        f"TrafficMap {map_key(tmap)} source UID {quote(recorded)} does not match "
        f"InferenceService UID {quote(uid)}"
    )


def not_ours_message(tmap: RawObject, name: str, uid: str) -> str | None:
    """OME's error for a map that this service does not own, else None."""
    if not has_exact_controller(tmap, name, uid):
        return (
            f"TrafficMap {map_key(tmap)} exists but is not controlled by "
            f"InferenceService UID {quote(uid)}"
        )
    return source_uid_problem(tmap, uid)


def needs_finalizer_repair(tmap: RawObject) -> bool:
    """The publisher holds claims but its finalizer is gone: it must restore it first."""
    return bool(claims_of(tmap.get("status") or {})) and FINALIZER not in (
        meta(tmap).get("finalizers") or []
    )


def reapable(isvc: RawObject | None, tmap: RawObject | None) -> tuple[bool, str | None]:
    """Whether routing deletes `tmap`; with OME's error when a map looks ours but is not.

    `isvc` is None when the service is gone (the caller has confirmed it with a live read).
    """
    if tmap is None or meta(tmap).get("deletionTimestamp"):
        return False, None
    if isvc is None:
        orphan = (
            not has_controller(tmap)
            and bool(source_uid(tmap))
            and (tmap.get("spec") or {}).get("service") == meta(tmap).get("name")
        )
        return orphan and not needs_finalizer_repair(tmap), None
    name, uid = str(meta(isvc).get("name") or ""), str(meta(isvc).get("uid") or "")
    if not has_exact_controller(tmap, name, uid) and (
        has_controller(tmap) or source_uid(tmap) != uid
    ):
        return False, None
    problem = source_uid_problem(tmap, uid)
    if problem is not None:
        return False, problem
    return not needs_finalizer_repair(tmap), None


def _plan_identity(isvc: RawObject) -> tuple[Any, Any] | None:
    placement = (isvc.get("status") or {}).get("placement")
    plan = placement.get("plan") if isinstance(placement, Mapping) else None
    if not isinstance(plan, Mapping):
        return None
    return plan.get("id"), plan.get("revision")


def same_snapshot(cached: RawObject, live: RawObject) -> bool:
    """OME's `SameSnapshot`: same UID, generation, labels, annotations and plan (id and
    revision), and the live object is not being deleted.

    kubectl's last-applied annotation is left out on both sides: the cache does not keep
    it (`watching.lean`), and a change to it alone changes nothing routing reads.
    """
    old, new = meta(lean(dict(cached))), meta(lean(dict(live)))
    return (
        old.get("uid") == new.get("uid")
        and old.get("generation") == new.get("generation")
        and not new.get("deletionTimestamp")
        and (old.get("annotations") or {}) == (new.get("annotations") or {})
        and (old.get("labels") or {}) == (new.get("labels") or {})
        and _plan_identity(cached) == _plan_identity(live)
    )
