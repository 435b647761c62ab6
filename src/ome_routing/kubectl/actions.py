"""`kubectl ome traffic drain` and `undrain`: guarded changes of the drain annotation.

The flow (the CLI does the I/O between the steps):

1. `check_request`: the flags, in a fixed order; the first problem refuses.
2. `plan_action`: the InferenceService as read; refuses what is unsafe to change, and
   works out the annotation's next value with `core.drains`.
3. `format_preview` (stderr), then confirmation.
4. `guarded_patch`: a JSON merge patch that carries the `uid` and `resourceVersion` read
   in step 2, so the API server refuses it (409 Conflict) when the service changed since:
   never a silent overwrite of someone else's drain.
5. `action_result` and `format_result_table` (stdout).

Errors: `ActionError` with the message the CLI prints after `error: ` and its exit code:
`Refused` (1) for everything the CLI decides, `PatchConflict` (3) when the guarded patch
loses a race.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ome_routing.core.drains import (
    ANNOTATION,
    MAX_ANNOTATION_BYTES,
    MAX_DRAINS,
    DrainAnnotationError,
    DrainArgumentError,
    DrainRefused,
    add_drain,
    check_cluster,
    check_drain_id,
    check_reason,
    parse_drains,
    remove_drain,
)
from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.table import Row, render_fields

API_VERSION = "cli.ome.io/v1alpha1"
DRAIN = "traffic drain"
UNDRAIN = "traffic undrain"
DRY_RUNS: tuple[str, ...] = ("none", "client", "server")
OUTPUTS: tuple[str, ...] = ("table", "wide", "json", "yaml")

EXIT_ERROR = 1
EXIT_CONFLICT = 3

# Messages: fixed texts, so that scripts can match them.
INVALID_FLAGS = "invalid traffic action flags; use --help"
ONE_SERVICE = "exactly one inference service is required"
BAD_OUTPUT = "output must be table, wide, json or yaml"
BAD_DRY_RUN = "dry-run must be none, client or server"
BAD_NAME = "invalid inference service name"
NEEDS_WORKLOAD_CLUSTER = (
    "traffic drain requires --workload-cluster; --cluster selects the Kubernetes API cluster"
)
BAD_ID = "traffic override ID must be a DNS-1123 label"
BAD_CLUSTER = "traffic drain cluster must be a DNS-1123 subdomain"
BAD_REASON = "traffic drain reason must be bounded, trimmed, printable, and non-secret"
NO_NAMESPACE = "resolve workload namespace failed"
BAD_NAMESPACE = "resolved workload namespace is invalid"
BAD_CONTEXT = "selected kubeconfig context is unavailable or unsafe"
READ_FAILED = "required Kubernetes API request failed; check access and connectivity"
OVER_BOUNDS = "traffic action refused: traffic-drain state exceeds safety bounds"
PLACEMENT_COPY = "action refused: placement sources and derived services cannot be mutated"
NOT_ELIGIBLE = "traffic action refused: target is not eligible for cross-cluster traffic routing"
BAD_IDENTITY = "action refused: target identity is missing or unsafe"
BEING_DELETED = "action refused: target is being deleted"
MALFORMED = "traffic action refused: existing traffic-drain annotation is malformed or unsafe"
NOT_CONFIRMED = "action not confirmed; noninteractive input requires --yes"
CONFLICT = "guarded annotation patch rejected; refresh traffic status and retry explicitly"

CLIENT_DRY_RUN_MESSAGE = (
    "Validated locally; no patch sent. TrafficMap convergence was not observed."
)
SERVER_DRY_RUN_MESSAGE = "API dry-run accepted; no changes persisted."
APPLIED_MESSAGE = "API accepted traffic annotation request; not TrafficMap convergence."
RESULT_HINT = "Use -o json or -o yaml for full values."

#: Labels or annotations that mark a copy placement made on a workload cluster.
PLACEMENT_MARKS: tuple[str, ...] = (
    "ome.io/placement-origin",
    "ome.io/placement-origin-uid",
    "ome.io/placement-control-plane",
)
#: Annotations that place a service without `spec.placement` (OME's legacy form).
LEGACY_PLACEMENT: tuple[str, ...] = ("ome.io/accelerator-requirements", "ome.io/cluster-selector")

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
_DNS1123_SUBDOMAIN = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)
#: Text that looks like a secret: an `sk-` API key, a JSON Web Token, a PEM block.
_CREDENTIAL = re.compile(
    r"(^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.|-----BEGIN ",
)
_UNSAFE_CONTEXT = re.compile(r"[\x00-\x1f\x7f]")


class ActionError(Exception):
    """The action stops; `message` follows `error: ` on stderr."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Refused(ActionError):
    """A check failed; nothing was sent."""


class PatchConflict(ActionError):
    """The service changed after it was read; the API server applied nothing."""

    exit_code = EXIT_CONFLICT


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What the user asked for, after `check_request`."""

    action: str
    name: str
    namespace: str
    context: str
    drain_id: str
    dry_run: str = "none"
    output: str = "table"
    cluster: str | None = None
    reason: str | None = None

    @property
    def follow_up(self) -> str:
        """A read-only command that shows the drains in the TrafficMap."""
        return f"kubectl ome placement endpoint {self.name} -n {self.namespace} --context={self.context}"


def is_dns1123_label(text: str) -> bool:
    return _DNS1123_LABEL.fullmatch(text) is not None


def is_dns1123_subdomain(text: str) -> bool:
    return len(text) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(text) is not None


def looks_secret(text: str) -> bool:
    return _CREDENTIAL.search(text) is not None


def check_request(
    action: str,
    names: tuple[str, ...],
    *,
    namespace: str | None,
    context: str | None,
    drain_id: str | None,
    cluster: str | None = None,
    reason: str | None = None,
    dry_run: str = "none",
    output: str = "table",
) -> ActionRequest:
    """The flags, checked in a fixed order; the first that fails refuses the action."""
    if len(names) != 1:
        raise Refused(ONE_SERVICE)
    if output not in OUTPUTS:
        raise Refused(BAD_OUTPUT)
    if dry_run not in DRY_RUNS:
        raise Refused(BAD_DRY_RUN)
    name = names[0]
    if not is_dns1123_subdomain(name) or looks_secret(name):
        raise Refused(BAD_NAME)
    if action == DRAIN and not cluster:
        raise Refused(NEEDS_WORKLOAD_CLUSTER)
    try:
        check_drain_id(drain_id or "")
    except DrainArgumentError:
        raise Refused(BAD_ID) from None
    if action == DRAIN:
        assert cluster is not None
        try:
            check_cluster(cluster)
        except DrainArgumentError:
            raise Refused(BAD_CLUSTER) from None
        try:
            check_reason(reason or "")
        except DrainArgumentError:
            raise Refused(BAD_REASON) from None
        if looks_secret(reason or ""):
            raise Refused(BAD_REASON)
    if not namespace:
        raise Refused(NO_NAMESPACE)
    if not is_dns1123_label(namespace):
        raise Refused(BAD_NAMESPACE)
    if not context or _UNSAFE_CONTEXT.search(context) or looks_secret(context):
        raise Refused(BAD_CONTEXT)
    assert drain_id is not None
    return ActionRequest(
        action=action,
        name=name,
        namespace=namespace,
        context=context,
        drain_id=drain_id,
        dry_run=dry_run,
        output=output,
        cluster=cluster if action == DRAIN else None,
        reason=reason if action == DRAIN else None,
    )


@dataclass(frozen=True, slots=True)
class ActionPlan:
    """The exact change: which object (at which version), and the annotation's next value."""

    request: ActionRequest
    uid: str
    resource_version: str
    #: The drain added or removed.
    cluster: str
    reason: str
    before: int
    after: int
    #: The annotation's next value; None removes it.
    value: str | None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count_drains(text: str) -> int | None:
    """How many drains the annotation holds, without judging them; None when it is not JSON."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return len(document) if isinstance(document, dict) else None


def plan_action(request: ActionRequest, isvc: Mapping[str, Any]) -> ActionPlan:
    """Refuse what is unsafe to change, else the change to send. Pure: `isvc` is as read."""
    meta = _mapping(isvc.get("metadata"))
    labels = _mapping(meta.get("labels"))
    annotations = _mapping(meta.get("annotations"))
    if meta.get("name") != request.name or meta.get("namespace") != request.namespace:
        raise Refused("action target response does not match exact request")
    current = annotations.get(ANNOTATION)
    if current is not None and not isinstance(current, str):
        raise Refused(MALFORMED)
    if current and (
        len(current.encode("utf-8", "surrogatepass")) > MAX_ANNOTATION_BYTES
        or (_count_drains(current) or 0) > MAX_DRAINS
    ):
        raise Refused(OVER_BOUNDS)
    if any(mark in labels or mark in annotations for mark in PLACEMENT_MARKS) or any(
        key in labels for key in LEGACY_PLACEMENT
    ):
        raise Refused(PLACEMENT_COPY)
    spec = _mapping(isvc.get("spec"))
    if not isinstance(spec.get("placement"), Mapping) and not any(
        key in annotations for key in LEGACY_PLACEMENT
    ):
        raise Refused(NOT_ELIGIBLE)
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
        raise Refused(BAD_IDENTITY)
    if meta.get("deletionTimestamp"):
        raise Refused(BEING_DELETED)
    try:
        before = len(parse_drains(current))
    except DrainAnnotationError:
        raise Refused(MALFORMED) from None
    try:
        if request.action == DRAIN:
            assert request.cluster is not None and request.reason is not None
            value: str | None = add_drain(
                current, request.drain_id, request.cluster, request.reason
            )
            cluster, reason = request.cluster, request.reason
        else:
            value, removed = remove_drain(current, request.drain_id)
            cluster, reason = removed.cluster, removed.reason
    except DrainRefused as err:
        raise Refused(str(err)) from None
    except DrainArgumentError:
        raise Refused(OVER_BOUNDS) from None
    return ActionPlan(
        request=request,
        uid=uid,
        resource_version=version,
        cluster=cluster,
        reason=reason,
        before=before,
        after=len(parse_drains(value)),
        value=value,
    )


def guarded_patch(plan: ActionPlan) -> dict[str, Any]:
    """A JSON merge patch that applies only to the version read: uid and resourceVersion
    are preconditions, and a null annotation value removes the annotation."""
    return {
        "metadata": {
            "uid": plan.uid,
            "resourceVersion": plan.resource_version,
            "annotations": {ANNOTATION: plan.value},
        }
    }


def preview_rows(plan: ActionPlan) -> list[Row]:
    request = plan.request
    return [
        ("Action", request.action),
        ("Context", request.context),
        ("Workload NS", request.namespace),
        ("Target", f"InferenceService/{request.name}"),
        ("UID", plan.uid),
        ("ResourceVersion", plan.resource_version),
        ("Dry-run", request.dry_run),
        ("Override ID", request.drain_id),
        ("Cluster", plan.cluster),
        ("Reason", json.dumps(plan.reason, ensure_ascii=False)),
        ("Override count", f"{plan.before} -> {plan.after}"),
        ("Annotation", ANNOTATION),
        ("Follow-up", request.follow_up),
    ]


PREVIEW_TITLE = "ALPHA guarded traffic action (not TrafficMap convergence)"
PREVIEW_NOTES: tuple[str, ...] = (
    "The patch applies only to this UID and resourceVersion; a change in between fails it.",
    "Every other annotation and drain ID stays as it is.",
    "Acceptance stores the annotation; the controller then rebuilds the TrafficMap.",
)
PROMPT = "Confirm this exact action? [y/N] "


def format_preview(plan: ActionPlan) -> str:
    """The exact change, every value in full, for stderr before the prompt."""
    return (
        PREVIEW_TITLE
        + "\n"
        + render_fields(preview_rows(plan), full=True)
        + "".join(note + "\n" for note in PREVIEW_NOTES)
    )


def confirmed(answer: str) -> bool:
    """`y` or `yes` in any case; anything else, or more than 16 characters, declines."""
    text = answer.strip()
    return len(answer.rstrip("\r\n")) <= 16 and text.lower() in ("y", "yes")


def result_message(dry_run: str) -> str:
    return {
        "client": CLIENT_DRY_RUN_MESSAGE,
        "server": SERVER_DRY_RUN_MESSAGE,
    }.get(dry_run, APPLIED_MESSAGE)


def action_result(plan: ActionPlan, now: datetime) -> dict[str, Any]:
    """The ActionResult of an action the API server accepted (or a client dry run)."""
    request = plan.request
    return {
        "apiVersion": API_VERSION,
        "kind": "ActionResult",
        "collectedAt": format_rfc3339(now),
        "action": request.action,
        "target": {
            "kind": "InferenceService",
            "namespace": request.namespace,
            "name": request.name,
            "uid": plan.uid,
            "resourceVersion": plan.resource_version,
        },
        "dryRun": request.dry_run,
        "accepted": request.dry_run != "client",
        "applied": request.dry_run == "none",
        "message": result_message(request.dry_run),
        "followUp": request.follow_up,
        "traffic": {
            "overrideID": request.drain_id,
            "cluster": plan.cluster,
            "overridesBefore": plan.before,
            "overridesAfter": plan.after,
        },
    }


def _yes(value: object) -> str:
    return "Yes" if value else "No"


def result_rows(result: Mapping[str, Any], *, wide: bool) -> list[Row]:
    target = _mapping(result.get("target"))
    traffic = _mapping(result.get("traffic"))
    rows: list[Row] = [
        ("action", str(result.get("action"))),
        ("target", f"InferenceService/{target.get('namespace')}/{target.get('name')}"),
    ]
    if wide:
        rows += [
            ("uid", str(target.get("uid"))),
            ("resource-version", str(target.get("resourceVersion"))),
        ]
    rows += [
        ("dry-run", str(result.get("dryRun"))),
        ("accepted", _yes(result.get("accepted"))),
        ("applied", _yes(result.get("applied"))),
        ("override-id", str(traffic.get("overrideID"))),
        ("cluster", str(traffic.get("cluster"))),
        ("overrides", f"{traffic.get('overridesBefore')} -> {traffic.get('overridesAfter')}"),
        ("message", str(result.get("message"))),
        ("follow-up", str(result.get("followUp"))),
        ("hint", RESULT_HINT),
    ]
    return rows


def format_result_table(result: Mapping[str, Any], *, wide: bool = False) -> str:
    return render_fields(result_rows(result, wide=wide))
