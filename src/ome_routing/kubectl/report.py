"""The envelope of OME's CLI reports (`cli.ome.io/v1alpha1`).

Every report is `{apiVersion, kind, metadata{namespace, name}, collectedAt, sources,
content, warnings}`: `sources` names the objects read, sorted by every field, each with
the report's `collectedAt`; `warnings` is always empty (problems are in the content).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ome_routing.core.report import format_rfc3339

API_VERSION = "cli.ome.io/v1alpha1"

Source = dict[str, Any]

_SOURCE_KEYS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "generation",
    "resourceVersion",
    "evidence",
    "collectedAt",
    "unavailableReason",
)


def source(
    kind: str, namespace: str, name: str, evidence: str, unavailable: str | None = None
) -> Source:
    out: Source = {"kind": kind, "name": name, "evidence": evidence}
    if namespace:
        out["namespace"] = namespace
    if unavailable:
        out["unavailableReason"] = unavailable
    return out


def _sort_key(item: Source) -> tuple[Any, ...]:
    return tuple(
        item.get(key, 0 if key == "generation" else "")
        for key in _SOURCE_KEYS
        if key != "collectedAt"
    )


def envelope(
    kind: str,
    namespace: str,
    name: str,
    collected_at: datetime,
    sources: Iterable[Source],
    content: Any,
) -> dict[str, Any]:
    stamp = format_rfc3339(collected_at)
    ordered: list[Source] = []
    for item in sorted(sources, key=_sort_key):
        full = {**item, "collectedAt": stamp}
        ordered.append({key: full[key] for key in _SOURCE_KEYS if key in full})
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {**({"namespace": namespace} if namespace else {}), "name": name},
        "collectedAt": stamp,
        "sources": ordered,
        "content": content,
        "warnings": [],
    }
