"""The checks of `kubectl ome traffic drain|undrain`, in OME's order and with OME's messages.

`check_request` checks the flags and the kubeconfig's namespace and context;
`check_target` checks the InferenceService as read (identity, deletion, bounds, placement
copies, eligibility for routing) before any change is planned. Every refusal is a
`Refused` whose message follows `error: `; nothing has been sent when one is raised.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ome_routing.core.drains import MAX_REASON_BYTES
from ome_routing.core.intent import is_placement_eligible
from ome_routing.core.names import dns1123_label_problems, dns1123_subdomain_problems, go_len
from ome_routing.kubectl.gotext import go_trim_space, is_control

DRAIN = "drain"
UNDRAIN = "undrain"
DRY_RUNS: tuple[str, ...] = ("none", "client", "server")
OUTPUTS: tuple[str, ...] = ("table", "wide", "json", "yaml")

EXIT_ERROR = 1
EXIT_CONFLICT = 3

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
CANCELED = "context canceled"
DEADLINE = "context deadline exceeded"
NOT_BOUND = "action target response does not match exact request"
OVER_BOUNDS = "traffic action refused: traffic-drain state exceeds safety bounds"
MALFORMED = "traffic action refused: existing traffic-drain annotation is malformed or unsafe"
NOT_ELIGIBLE = "traffic action refused: target is not eligible for cross-cluster traffic routing"
PLACEMENT_COPY = "action refused: placement sources and derived services cannot be mutated"
BAD_IDENTITY = "action refused: target identity is missing or unsafe"
BEING_DELETED = "action refused: target is being deleted"
INSPECTION_BOUNDS = "action refused: safety inputs exceed inspection bounds"

PLACEMENT_ORIGIN = "ome.io/placement-origin"
PLACEMENT_ORIGIN_UID = "ome.io/placement-origin-uid"
PLACEMENT_CONTROL_PLANE = "ome.io/placement-control-plane"
REQUIREMENTS_ANNOTATION = "ome.io/accelerator-requirements"
SELECTOR_ANNOTATION = "ome.io/cluster-selector"
PLACEMENT_FINALIZER = "ome.io/placement"

_SCALAR = re.compile(r"[A-Za-z0-9_.:/@+-]+")
_CREDENTIAL = re.compile(
    r"(?:^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}"
    r"|^[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}$"
)
_PAYLOAD_BYTES = 1024 * 1024
_PAYLOAD_NODES = 32768
_PAYLOAD_DEPTH = 32


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


def safe_scalar(value: str) -> bool:
    """OME's `SafeScalar`: a bounded identity of plain characters, not credential-shaped."""
    if not 0 < len(value) <= 256 or _SCALAR.fullmatch(value) is None:
        return False
    if _CREDENTIAL.search(value):
        return False
    at = value.rfind("@")
    if at >= 0:
        userinfo = value[:at]
        scheme = userinfo.find("://")
        if scheme >= 0:
            userinfo = userinfo[scheme + 3 :]
        if ":" in userinfo:
            return False
    return True


def safe_reason(value: str) -> bool:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if value == "" or size > MAX_REASON_BYTES or go_trim_space(value) != value:
        return False
    if _CREDENTIAL.search(value):
        return False
    return not any(is_control(ch) or unicodedata.category(ch) in ("Cf", "Zl", "Zp") for ch in value)


def request_problem(action: str, drain_id: str, cluster: str, reason: str) -> str | None:
    """OME's `ValidateTrafficDrainRequest`: the message of the first problem, or None."""
    if dns1123_label_problems(drain_id) or not safe_scalar(drain_id):
        return BAD_ID
    if action == UNDRAIN:
        return "traffic undrain accepts only an override ID" if cluster or reason else None
    if dns1123_subdomain_problems(cluster) or not safe_scalar(cluster):
        return BAD_CLUSTER
    if not safe_reason(reason):
        return BAD_REASON
    return None


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What the user asked for, after `check_flags` and `check_scope`."""

    action: str
    name: str
    namespace: str
    context: str
    drain_id: str
    dry_run: str = "none"
    output: str = "table"
    cluster: str = ""
    reason: str = ""

    @property
    def follow_up(self) -> str:
        """The read-only command that shows what the controller made of the change."""
        return (
            f"kubectl ome traffic status {self.name} -n {self.namespace} --context={self.context}"
        )


def check_flags(
    action: str,
    names: tuple[str, ...],
    *,
    drain_id: str,
    cluster: str,
    reason: str,
    dry_run: str,
    output: str,
) -> None:
    """The checks that need no kubeconfig, in OME's order."""
    if len(names) != 1:
        raise Refused(ONE_SERVICE)
    if output not in OUTPUTS:
        raise Refused(BAD_OUTPUT)
    if dry_run not in DRY_RUNS:
        raise Refused(BAD_DRY_RUN)
    if not safe_scalar(names[0]) or dns1123_subdomain_problems(names[0]):
        raise Refused(BAD_NAME)
    if action == DRAIN and cluster == "":
        raise Refused(NEEDS_WORKLOAD_CLUSTER)
    problem = request_problem(action, drain_id, cluster, reason)
    if problem is not None:
        raise Refused(problem)


def check_scope(namespace: str | None, context: str | None) -> tuple[str, str]:
    """The namespace and the kubeconfig context, as OME checks them before reading."""
    if namespace is None:
        raise Refused(NO_NAMESPACE)
    if not safe_scalar(namespace) or dns1123_label_problems(namespace):
        raise Refused(BAD_NAMESPACE)
    if context is None or not safe_scalar(context):
        raise Refused(BAD_CONTEXT)
    return namespace, context


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def bounded_payload(value: object) -> bool:
    """OME's bound on the whole object: depth 32, 32768 nodes, 1 MiB (approximated on JSON)."""
    budget = {"nodes": 0, "bytes": 0}

    def visit(item: object, depth: int) -> bool:
        budget["nodes"] += 1
        budget["bytes"] += 8
        if depth > _PAYLOAD_DEPTH or budget["nodes"] > _PAYLOAD_NODES:
            return False
        if isinstance(item, str):
            budget["bytes"] += len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, Mapping):
            if len(item) > _PAYLOAD_NODES:
                return False
            if not all(visit(k, depth + 1) and visit(v, depth + 1) for k, v in item.items()):
                return False
        elif isinstance(item, list) and (
            len(item) > _PAYLOAD_NODES or not all(visit(v, depth + 1) for v in item)
        ):
            return False
        return budget["bytes"] <= _PAYLOAD_BYTES

    return visit(value, 0)


def metadata_bytes(meta: Mapping[str, Any]) -> int:
    """The bytes of the annotations, labels and finalizers, as Go's `len` counts them."""
    return _bytes(
        _mapping(meta.get("annotations")), _mapping(meta.get("labels")), meta.get("finalizers")
    )


def _bytes(annotations: Mapping[str, Any], labels: Mapping[str, Any], finalizers: Any) -> int:
    total = sum(go_len(str(k)) + go_len(str(v)) for k, v in annotations.items())
    total += sum(go_len(str(k)) + go_len(str(v)) for k, v in labels.items())
    return total + sum(go_len(str(f)) for f in finalizers or [])


def check_target(isvc: Mapping[str, Any], name: str, namespace: str) -> None:
    """OME's checks of the InferenceService a drain changes (`validateTrafficDrainTarget`)."""
    meta = _mapping(isvc.get("metadata"))
    if meta.get("name") != name or meta.get("namespace") != namespace:
        raise Refused(NOT_BOUND)
    spec, status = _mapping(isvc.get("spec")), _mapping(isvc.get("status"))
    annotations, labels = _mapping(meta.get("annotations")), _mapping(meta.get("labels"))
    finalizers = list(meta.get("finalizers") or [])
    if not bounded_payload(isvc):
        raise Refused(OVER_BOUNDS)
    if (
        len(annotations) > 256
        or len(labels) > 256
        or len(finalizers) > 64
        or len(status.get("conditions") or []) > 64
        or len(_mapping(status.get("components"))) > 3
    ):
        raise Refused(OVER_BOUNDS)
    if PLACEMENT_ORIGIN in labels or PLACEMENT_CONTROL_PLANE in labels:
        raise Refused(PLACEMENT_COPY)
    if PLACEMENT_ORIGIN_UID in annotations:
        raise Refused(PLACEMENT_COPY)
    if not is_placement_eligible(meta, spec):
        raise Refused(NOT_ELIGIBLE)
    if metadata_bytes(meta) > 65536:
        raise Refused(OVER_BOUNDS)
    copy = dict(annotations)
    copy.pop(REQUIREMENTS_ANNOTATION, None)
    copy.pop(SELECTOR_ANNOTATION, None)
    _check_identity(isvc, meta, copy, labels, [f for f in finalizers if f != PLACEMENT_FINALIZER])


def _check_identity(
    isvc: Mapping[str, Any],
    meta: Mapping[str, Any],
    annotations: Mapping[str, Any],
    labels: Mapping[str, Any],
    finalizers: list[str],
) -> None:
    """OME's generic `ValidateTarget`, on a copy without the placement markers."""
    kind, api_version = isvc.get("kind") or "", isvc.get("apiVersion") or ""
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    generation = meta.get("generation")
    if (
        kind not in ("", "InferenceService")
        or api_version not in ("", "ome.io/v1beta1")
        or dns1123_subdomain_problems(name)
        or dns1123_label_problems(namespace)
        or not safe_scalar(name)
        or not safe_scalar(namespace)
        or not (isinstance(uid, str) and safe_scalar(uid))
        or not (isinstance(version, str) and safe_scalar(version))
        or not (isinstance(generation, int) and generation > 0)
    ):
        raise Refused(BAD_IDENTITY)
    if meta.get("deletionTimestamp"):
        raise Refused(BEING_DELETED)
    status = _mapping(isvc.get("status"))
    if len(annotations) > 256 or len(labels) > 256 or len(finalizers) > 64:
        raise Refused(INSPECTION_BOUNDS)
    if _bytes(annotations, labels, finalizers) > 65536:
        raise Refused(INSPECTION_BOUNDS)
    for component in _mapping(status.get("components")).values():
        if len(_mapping(component).get("traffic") or []) > 8:
            raise Refused(INSPECTION_BOUNDS)
    if len(_mapping(status.get("canary")).get("metricResults") or []) > 10:
        raise Refused(INSPECTION_BOUNDS)
    for key in (PLACEMENT_ORIGIN, PLACEMENT_ORIGIN_UID, PLACEMENT_CONTROL_PLANE):
        if key in annotations or key in labels:
            raise Refused(PLACEMENT_COPY)
    for key in (REQUIREMENTS_ANNOTATION, SELECTOR_ANNOTATION):
        if key in labels:
            raise Refused(PLACEMENT_COPY)
