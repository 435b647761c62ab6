"""`content.status` of OME's placement reports: the InferenceService's placement inputs and
the placement the controller reports in `status.placement`, with each home.

A structured `spec.placement` carries no selectors (OME v1.3), so its requirements state is
`NoRequirements`; the legacy selector annotations are only reported as present. Homes
are the `status.placement.candidates`, sorted by cluster, at most 64 kept; a malformed
candidate, or two differing candidates for one cluster, leaves the list unread.
"""

from __future__ import annotations

from typing import Any

from ome_routing.kubectl.gotext import go_json_compact, public_name, public_namespace, safe_text
from ome_routing.kubectl.gourl import address
from ome_routing.kubectl.objects import Autoscaling, Candidate, Isvc, Rollout
from ome_routing.kubectl.placement_values import (
    Value,
    add_issue,
    count,
    pointer_count,
    preview,
    reported,
)

__all__ = ["PlacementInputError", "mode_value", "project_status"]

REQUIREMENTS_ANNOTATION = "ome.io/accelerator-requirements"
SELECTOR_ANNOTATION = "ome.io/cluster-selector"
_PHASES = ("Pending", "Admitting", "Racing", "Placed", "Failed")
_CANDIDATE_PHASES = ("Admitting", "Placed", "Admitted")
_COMPONENTS = ("engine", "decoder", "router")
_OUTCOMES = ("Completed", "RolledBack", "Superseded")
_HEX = frozenset("0123456789abcdef")


class PlacementInputError(ValueError):
    """The InferenceService has no identity a report can be bound to."""


def mode_value(mode: str) -> str:
    return mode if mode in ("Single", "All", "Split") else "Unknown"


def _phase(phase: str, known: tuple[str, ...]) -> str:
    if phase in known:
        return phase
    return "NotRecorded" if phase == "" else "Unknown"


def _inputs(isvc: Isvc) -> Value:
    annotations = isvc.meta.annotations
    inputs: Value = {
        "source": "LegacyAnnotations",
        "mode": "Single",
        "modeEvidence": "Defaulted",
        "requirements": {},
        "clusterSelector": {},
        "legacyRequirementsPresent": annotations.get(REQUIREMENTS_ANNOTATION, "") != "",
        "legacyClusterSelectorPresent": annotations.get(SELECTOR_ANNOTATION, "") != "",
        "requirementsState": "NoRequirements",
    }
    requirements = annotations.get(REQUIREMENTS_ANNOTATION, "")
    selector = annotations.get(SELECTOR_ANNOTATION, "")
    if isvc.has_placement:
        inputs["source"] = "Structured"
        requirements = selector = ""
        if isvc.mode:
            inputs["mode"] = mode_value(isvc.mode)
            inputs["modeEvidence"] = "Declared"
        if isvc.split is not None:
            replicas, per_cluster = isvc.split
            inputs["split"] = {
                "replicas": pointer_count(replicas),
                "spread": "UnknownOrDefaultedPacked",
                "maxReplicasPerCluster": count(per_cluster, True),
                "minReplicasPerCluster": count(0, False),
            }
    inputs["requirements"] = {"present": requirements != "", "state": "Absent"}
    inputs["clusterSelector"] = {"present": selector != "", "state": "Absent"}
    if requirements or selector:
        _legacy_selectors(inputs, requirements, selector)
    split = inputs.pop("split", None)
    if split is not None:
        inputs["split"] = split
    return inputs


def _legacy_selectors(inputs: Value, requirements: str, selector: str) -> None:
    """Annotation selectors: bounded and safe; their parse is not reproduced (see README)."""
    inputs["requirementsState"] = "Valid"
    for raw, target in ((requirements, "requirements"), (selector, "clusterSelector")):
        if not raw:
            continue
        if len(raw.encode("utf-8", "surrogatepass")) > 4096:
            inputs[target]["state"] = "BudgetExceeded"
            inputs["requirementsState"] = "BudgetExceeded"
            return
        if not safe_text(raw, 4096, True):
            inputs[target]["state"] = "InvalidSelector"
            inputs["requirementsState"] = "InvalidSelector"
            return
        inputs[target]["state"] = "Valid"


def _valid_home(home: Candidate) -> bool:
    return (
        public_name(home.cluster)
        and safe_text(home.phase, 64, False)
        and home.admitted >= 0
        and home.ready >= 0
        and (home.endpoint is None or address(home.endpoint)["state"] == "Present")
    )


def _bounded_provenance(home: Candidate) -> bool:
    if home.autoscaling is not None:
        scaling = home.autoscaling
        if len(scaling.policies) > 64 or len(scaling.components) > 3:
            return False
        if not all(
            safe_text(name, 253, False) and safe_text(digest, 256, False)
            for name, digest in scaling.policies
        ):
            return False
        if not all(
            safe_text(key, 64, False) and safe_text(digest, 256, False)
            for key, (digest, _) in scaling.components.items()
        ):
            return False
    if home.rollout is not None:
        rollout = home.rollout
        if len(rollout.groups) > 64 or not safe_text(rollout.active_run_id, 256, False):
            return False
        if not all(
            safe_text(source, 64, False)
            and safe_text(policy, 253, False)
            and safe_text(digest, 256, False)
            for source, policy, digest in rollout.groups
        ):
            return False
        last = rollout.last_run
        if last is not None and not (
            safe_text(last[0], 64, False) and safe_text(last[1], 256, False)
        ):
            return False
    return True


def _safe_digest(value: str, prefix: str) -> bool:
    if value == "":
        return True
    return (
        len(value) == len(prefix) + 12
        and value.startswith(prefix)
        and all(ch in _HEX for ch in value[len(prefix) :])
    )


def _digest_state(value: str) -> str:
    return "Reported" if value else "NotRecorded"


def _truth(value: bool) -> str:
    return "ReportedTrue" if value else "Unknown"


def _provenance_value(
    state: str,
    *,
    policies: list[Value] | None = None,
    policy_preview: str | Value = "NotRecorded",
    components: list[Value] | None = None,
    autoscaling_ready: str = "Unknown",
    active_run: bool = False,
    groups: list[Value] | None = None,
    group_preview: str | Value = "NotRecorded",
    outcome: str = "NotRecorded",
    last_digest: str = "",
    digest_state: str = "NotRecorded",
) -> Value:
    out: Value = {
        "state": state,
        "source": reported(),
        "policies": policies or [],
        "policyPreview": preview(policy_preview)
        if isinstance(policy_preview, str)
        else policy_preview,
        "components": sorted(components or [], key=go_json_compact),
        "autoscalingReady": autoscaling_ready,
        "activeRunPresent": active_run,
        "activeGroups": groups or [],
        "groupPreview": preview(group_preview) if isinstance(group_preview, str) else group_preview,
        "lastOutcome": outcome,
    }
    if last_digest:
        out["lastDigest"] = last_digest
    out["lastDigestState"] = digest_state
    return out


def _invalid_provenance() -> Value:
    return _provenance_value(
        "MalformedPayload",
        policy_preview="Unavailable",
        group_preview="Unavailable",
        outcome="Unknown",
        digest_state="Unavailable",
    )


def _scaling_provenance(scaling: Autoscaling, fields: dict[str, Any]) -> bool:
    seen: dict[str, str] = {}
    for name, digest in scaling.policies:
        if not public_name(name) or not _safe_digest(digest, "pv1:"):
            return False
        if name in seen and seen[name] != digest:
            return False
        seen[name] = digest
    names = sorted(seen)
    fields["policy_preview"] = preview(
        "Validated", len(names), min(len(names), 16), len(names) > 16
    )
    policies: list[Value] = []
    for name in names[:16]:
        policy: Value = {"name": name}
        if seen[name]:
            policy["portableDigest"] = seen[name]
        policy["digestState"] = _digest_state(seen[name])
        policies.append(policy)
    fields["policies"] = policies
    components: list[Value] = []
    for component, (digest, ready) in scaling.components.items():
        if component not in _COMPONENTS or not _safe_digest(digest, "rv1:"):
            return False
        item: Value = {"component": component}
        if digest:
            item["resolvedDigest"] = digest
        item.update(digestState=_digest_state(digest), ready=_truth(ready))
        components.append(item)
    fields["components"] = components
    fields["autoscaling_ready"] = _truth(scaling.ready)
    return True


def _rollout_provenance(rollout: Rollout, fields: dict[str, Any]) -> bool:
    fields["active_run"] = rollout.active_run_id != ""
    for source, policy, digest in rollout.groups:
        if (
            source not in ("Inline", "Policy")
            or not _safe_digest(digest, "rp1:")
            or (source == "Policy" and not public_name(policy))
            or (source == "Inline" and policy != "")
        ):
            return False
    total = len(rollout.groups)
    fields["group_preview"] = preview("Validated", total, min(total, 16), total > 16)
    groups: list[Value] = []
    for ordinal, (source, policy, digest) in enumerate(rollout.groups[:16]):
        group: Value = {"ordinal": ordinal, "source": source}
        if policy:
            group["policyName"] = policy
        if digest:
            group["portableDigest"] = digest
        group["digestState"] = _digest_state(digest)
        groups.append(group)
    fields["groups"] = groups
    if rollout.last_run is not None:
        outcome, digest = rollout.last_run
        if not _safe_digest(digest, "rp1:"):
            return False
        fields["outcome"] = outcome if outcome in _OUTCOMES else "Unknown"
        fields["last_digest"] = digest
        fields["digest_state"] = _digest_state(digest)
    return True


def provenance(home: Candidate) -> Value:
    """The AutoscalerPolicy and rollout digests the controller recorded for a home."""
    scaling, rollout = home.autoscaling, home.rollout
    if scaling is None and rollout is None:
        return _provenance_value("NotRecorded")
    over = (
        scaling is not None and (len(scaling.policies) > 64 or len(scaling.components) > 3)
    ) or (rollout is not None and len(rollout.groups) > 64)
    if over or not _bounded_provenance(home):
        state = "BudgetExceeded" if over else "MalformedPayload"
        return _provenance_value(state, policy_preview="Unavailable", group_preview="Unavailable")
    fields: dict[str, Any] = {}
    if scaling is not None and not _scaling_provenance(scaling, fields):
        return _invalid_provenance()
    if rollout is not None and not _rollout_provenance(rollout, fields):
        return _invalid_provenance()
    return _provenance_value("Reported", **fields)


def project_status(isvc: Isvc) -> Value:
    """`PlacementStatusContent`; raises `PlacementInputError` without a usable identity."""
    meta = isvc.meta
    if (
        not public_name(meta.name)
        or not public_namespace(meta.namespace)
        or meta.uid == ""
        or meta.generation < 0
    ):
        raise PlacementInputError("placement requires a valid identity-bound InferenceService")
    inputs = _inputs(isvc)
    issues: list[Value] = []
    placement: Value = {
        "phase": "NotRecorded",
        "source": reported(),
        "address": address(None),
        "serviceAddress": address(isvc.url),
        "homes": [],
        "homePreview": preview("NotRecorded"),
        "provenancePreview": preview("NotRecorded"),
    }
    content: Value = {"inputs": inputs, "placement": placement, "issues": issues}
    if isvc.placement is None:
        return content
    placement["phase"] = _phase(isvc.phase, _PHASES)
    if isvc.phase and placement["phase"] == "Unknown":
        add_issue(issues, "PlacementPhase", "UnknownValue")
    if isvc.cluster:
        if public_name(isvc.cluster):
            placement["reportedCluster"] = isvc.cluster
        else:
            add_issue(issues, "Placement", "InvalidCluster")
    placement["address"] = address(isvc.endpoint)
    _homes(isvc, placement, issues, inputs["mode"] == "Split")
    content["placement"] = _ordered_placement(placement)
    return content


def _ordered_placement(placement: Value) -> Value:
    keys = (
        "phase",
        "reportedCluster",
        "source",
        "address",
        "serviceAddress",
        "homes",
        "homePreview",
        "provenancePreview",
    )
    return {key: placement[key] for key in keys if key in placement}


def _homes(isvc: Isvc, placement: Value, issues: list[Value], split: bool) -> None:
    candidates = isvc.candidates
    total = len(candidates)
    placement["homePreview"] = preview("NotRecorded", total=total)
    placement["provenancePreview"] = preview("Unavailable", total=total)
    if total > 256:
        placement["homePreview"]["state"] = "BudgetExceeded"
        return
    seen: dict[str, Candidate] = {}
    projected: dict[str, Value] = {}
    candidate_issues: list[Value] = []
    provenance_state = "Validated"
    for home in candidates:
        if not _valid_home(home):
            placement["homePreview"]["state"] = "MalformedPayload"
            return
        prior = seen.get(home.cluster)
        if prior is not None:
            if (
                not (_bounded_provenance(prior) and _bounded_provenance(home))
                or prior.raw != home.raw
            ):
                placement["homePreview"]["state"] = "ConflictingDuplicates"
                return
            continue
        seen[home.cluster] = home
        prov = provenance(home)
        if prov["state"] in ("MalformedPayload", "BudgetExceeded"):
            add_issue(candidate_issues, "CandidateProvenance", prov["state"])
            provenance_state = "Unavailable"
        phase = _phase(home.phase, _CANDIDATE_PHASES)
        if home.phase and phase == "Unknown":
            add_issue(candidate_issues, "CandidatePhase", "UnknownValue")
        projected[home.cluster] = {
            "cluster": home.cluster,
            "phase": phase,
            "address": address(home.endpoint),
            "admittedReplicas": count(home.admitted, split),
            "readyReplicas": count(home.ready, split),
            "provenance": prov,
            "source": reported(),
        }
    issues.extend(candidate_issues)
    names = sorted(seen)
    kept = min(len(names), 64)
    truncated = len(names) > 64
    placement["homePreview"] = preview("Validated", len(names), kept, truncated)
    placement["provenancePreview"] = preview(provenance_state, len(names), kept, truncated)
    placement["homes"] = [projected[name] for name in names[:64]]
