"""`kubectl ome traffic drain` and `undrain`: guarded changes of the drain annotation.

The flow (the CLI does the I/O between the steps):

1. `drain_checks.check_flags`, then `check_scope` (namespace and context).
2. `plan_action`: the InferenceService as read, checked by `drain_checks.check_target`;
   the whole annotation is read strictly and every drain in it re-checked, then the
   annotation's next value is worked out by the controller's codec (`core.drains`:
   `add_drain`/`remove_drain`, compact JSON sorted by ID, with its constants).
3. `format_preview` on stderr, then confirmation.
4. `ActionPlan.patch`: a JSON Patch whose first operations `test` the uid and
   resourceVersion read in step 2, so the API server applies nothing when the service
   changed since (a 409, or a 422 for a failed test: exit code 3).
5. `check_response`: the API server's answer must name the same InferenceService.
6. `action_result` and `format_result_table` (stdout).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ome_routing.core.drains import (
    ALREADY_EXISTS,
    ANNOTATION,
    DOES_NOT_EXIST,
    MAX_ANNOTATION_BYTES,
    MAX_DRAINS,
    DrainAnnotationError,
    DrainLimitError,
    DrainRefused,
    add_drain,
    parse_drains,
    remove_drain,
)
from ome_routing.core.names import go_len
from ome_routing.core.quoting import quote
from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.drain_checks import (
    DRAIN,
    MALFORMED,
    OVER_BOUNDS,
    ActionRequest,
    Refused,
    check_target,
    metadata_bytes,
    request_problem,
    safe_scalar,
)
from ome_routing.kubectl.gotext import bounded_cell, display_width, go_json_compact
from ome_routing.kubectl.report import API_VERSION
from ome_routing.kubectl.table import Row, render_fields, render_table

NOT_CONFIRMED = "action not confirmed; noninteractive input requires --yes"
CONFLICT = "guarded annotation patch rejected; refresh traffic status and retry explicitly"
NOT_SAFELY_BOUND = (
    "API response is not safely bound to the request; outcome unknown, check traffic status"
)
NOT_BOUND_RESPONSE = (
    "API response is not bound to the request; outcome unknown, check traffic status"
)
RESPONSE_BOUNDS = "API response exceeds safety bounds; outcome unknown, check traffic status"
WRITE_FAILED = "write traffic action result failed; check traffic status"
CLIENT_DRY_RUN_MESSAGE = (
    "Validated locally; no patch sent. TrafficMap convergence was not observed."
)
SERVER_DRY_RUN_MESSAGE = "API dry-run accepted; no changes persisted."
APPLIED_MESSAGE = "API accepted traffic annotation request; not TrafficMap convergence."
RESULT_HINT = "Use -o json or -o yaml for full values."
PREVIEW_TITLE = "ALPHA guarded traffic action (not TrafficMap convergence)"
PREVIEW_NOTES: tuple[str, ...] = (
    "API acceptance is not TrafficMap convergence or data-plane realization.",
    "The exact InferenceService UID/resourceVersion is tested atomically.",
    "Other annotations and traffic-drain override IDs are preserved.",
    "Run the previewed traffic status command to observe controller evidence.",
)
PROMPT = "Confirm this exact action? [y/N] "
#: The largest answer the API server may send back, in bytes.
RESPONSE_LIMIT = 1024 * 1024
PREVIEW_WIDTH = 60
NOTE_WIDTH = 80


@dataclass(frozen=True, slots=True)
class ActionPlan:
    """The exact change: which object (at which version), and the drain it adds or removes."""

    request: ActionRequest
    uid: str
    resource_version: str
    cluster: str
    reason: str
    before: int
    after: int
    #: The guarded JSON Patch, as sent.
    patch: str


def _escape_pointer(value: str) -> str:
    return value.replace("~", "~0").replace("/", "~1")


def plan_action(request: ActionRequest, isvc: Mapping[str, Any]) -> ActionPlan:
    """Refuse what is unsafe to change, else the guarded patch. Pure: `isvc` is as read."""
    check_target(isvc, request.name, request.namespace)
    meta = isvc["metadata"]
    annotations: Mapping[str, str] | None = meta.get("annotations")
    present = annotations is not None and ANNOTATION in annotations
    raw = annotations[ANNOTATION] if annotations is not None and present else None
    if raw is not None and len(raw.encode("utf-8", "surrogatepass")) > MAX_ANNOTATION_BYTES:
        raise Refused(OVER_BOUNDS)
    try:
        drains = dict(parse_drains(raw))
    except DrainAnnotationError:
        raise Refused(MALFORMED) from None
    if len(drains) > MAX_DRAINS:
        raise Refused(OVER_BOUNDS)
    for drain_id, drain in drains.items():
        if request_problem(DRAIN, drain_id, drain.cluster, drain.reason) is not None:
            raise Refused(MALFORMED)
    before = len(drains)
    encoded: str | None
    try:
        if request.action == DRAIN:
            # `check_flags` held the request to OME's rules, stricter than `add_drain`'s
            cluster, reason = request.cluster, request.reason
            encoded = add_drain(raw, request.drain_id, cluster, reason)
            after = before + 1
        else:
            encoded, removed = remove_drain(raw, request.drain_id)
            cluster, reason = removed.cluster, removed.reason
            after = before - 1
    except DrainRefused:
        raise Refused(ALREADY_EXISTS if request.action == DRAIN else DOES_NOT_EXIST) from None
    except DrainLimitError:
        raise Refused(OVER_BOUNDS) from None
    uid, version = meta["uid"], meta["resourceVersion"]
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
    ]
    path = "/metadata/annotations/" + _escape_pointer(ANNOTATION)
    if encoded is None:
        operations.append({"op": "remove", "path": path})
    else:
        size = len(encoded.encode("utf-8"))
        if size > MAX_ANNOTATION_BYTES:
            raise Refused(OVER_BOUNDS)
        if not present and len(annotations or {}) >= 256:
            raise Refused(OVER_BOUNDS)
        projected = metadata_bytes(meta)
        if raw is not None:
            projected -= go_len(ANNOTATION) + go_len(raw)
        if projected + go_len(ANNOTATION) + size > 65536:
            raise Refused(OVER_BOUNDS)
        if annotations is None:
            operations.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        operations.append({"op": "replace" if present else "add", "path": path, "value": encoded})
    return ActionPlan(
        request=request,
        uid=uid,
        resource_version=version,
        cluster=cluster,
        reason=reason,
        before=before,
        after=after,
        patch=go_json_compact(operations),
    )


def check_response(body: bytes, plan: ActionPlan) -> None:
    """The API server's answer must be the same InferenceService: else the outcome is unknown."""
    if not body or len(body) > RESPONSE_LIMIT:
        raise Refused(RESPONSE_BOUNDS)
    try:
        document = json.loads(body)
    except ValueError:
        raise Refused(NOT_BOUND_RESPONSE) from None
    meta = document.get("metadata") if isinstance(document, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    version = meta.get("resourceVersion")
    request = plan.request
    if (
        not isinstance(document, dict)
        or document.get("apiVersion") != "ome.io/v1beta1"
        or document.get("kind") != "InferenceService"
        or meta.get("name") != request.name
        or meta.get("namespace") != request.namespace
        or meta.get("uid") != plan.uid
        or not (isinstance(version, str) and safe_scalar(version))
    ):
        raise Refused(NOT_BOUND_RESPONSE)


# --- preview ----------------------------------------------------------------------------


def _chunks(value: str, width: int) -> list[str]:
    """The value cut into pieces of at most `width` columns (never an empty piece)."""
    pieces: list[str] = []
    rest = value
    while rest:
        piece = ""
        for char in rest:
            if piece and display_width(piece + char) > width:
                break
            piece += char
        pieces.append(piece)
        rest = rest[len(piece) :]
    return pieces


def preview_rows(plan: ActionPlan) -> list[Row]:
    request = plan.request
    fields = [
        ("Action", f"traffic {request.action}"),
        ("Context", request.context),
        ("Workload NS", request.namespace),
        ("Target", f"InferenceService/{request.name}"),
        ("UID", plan.uid),
        ("ResourceVersion", plan.resource_version),
        ("Dry-run", request.dry_run),
        ("Override ID", request.drain_id),
        ("Cluster", plan.cluster),
        ("Reason", quote(plan.reason)),
        ("Override count", f"{plan.before} -> {plan.after}"),
        ("Annotation", ANNOTATION),
        ("Follow-up", request.follow_up),
    ]
    rows: list[Row] = []
    for field, value in fields:
        for index, piece in enumerate(_chunks(value or "<absent>", PREVIEW_WIDTH)):
            rows.append((field if index == 0 else "(continued)", piece))
    return rows


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and display_width(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return [*lines, line] if line else lines


def format_preview(plan: ActionPlan) -> str:
    """The exact change, every value in full, for stderr before the prompt."""
    notes = [line for note in PREVIEW_NOTES for line in _wrap(note, NOTE_WIDTH)]
    table = render_table(("FIELD", "VALUE"), preview_rows(plan))
    return PREVIEW_TITLE + "\n" + table + "".join(line + "\n" for line in notes)


# --- result -----------------------------------------------------------------------------


def result_message(dry_run: str) -> str:
    return {"client": CLIENT_DRY_RUN_MESSAGE, "server": SERVER_DRY_RUN_MESSAGE}.get(
        dry_run, APPLIED_MESSAGE
    )


def action_result(plan: ActionPlan, now: datetime, *, accepted: bool) -> dict[str, Any]:
    """OME's `ActionResult` of an action (`accepted`: the API server took the patch)."""
    request = plan.request
    traffic: dict[str, Any] = {"overrideID": request.drain_id}
    if plan.cluster:
        traffic["cluster"] = plan.cluster
    traffic.update(overridesBefore=plan.before, overridesAfter=plan.after)
    return {
        "apiVersion": API_VERSION,
        "kind": "ActionResult",
        "collectedAt": format_rfc3339(now),
        "action": f"traffic {request.action}",
        "target": {
            "kind": "InferenceService",
            "namespace": request.namespace,
            "name": request.name,
            "uid": plan.uid,
            "resourceVersion": plan.resource_version,
        },
        "dryRun": request.dry_run,
        "accepted": accepted and request.dry_run != "client",
        "applied": accepted and request.dry_run == "none",
        "message": result_message(request.dry_run) if accepted else CLIENT_DRY_RUN_MESSAGE,
        "followUp": request.follow_up,
        "traffic": traffic,
    }


def _yes(value: object) -> str:
    return "Yes" if value else "No"


def result_rows(result: Mapping[str, Any], *, wide: bool) -> list[Row]:
    target = result["target"]
    traffic = result["traffic"]
    rows: list[Row] = [
        ("action", str(result["action"])),
        ("target", f"InferenceService/{target['namespace']}/{target['name']}"),
    ]
    if wide:
        rows += [
            ("uid", str(target.get("uid") or "-")),
            ("resource-version", str(target.get("resourceVersion") or "-")),
        ]
    return [
        *rows,
        ("dry-run", str(result["dryRun"])),
        ("accepted", _yes(result["accepted"])),
        ("applied", _yes(result["applied"])),
        ("override-id", str(traffic["overrideID"])),
        ("cluster", str(traffic.get("cluster") or "-")),
        ("overrides", f"{traffic['overridesBefore']} -> {traffic['overridesAfter']}"),
        ("message", str(result.get("message") or "-")),
        ("follow-up", str(result.get("followUp") or "-")),
        ("hint", RESULT_HINT),
    ]


def format_result_table(result: Mapping[str, Any], *, wide: bool = False) -> str:
    rows = [(field, bounded_cell(value, 56)) for field, value in result_rows(result, wide=wide)]
    return render_fields(rows, bounded=False)
