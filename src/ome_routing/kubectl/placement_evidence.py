"""Per-entry evidence of a TrafficMap, as OME's placement report reads it.

- Drain IDs (`drainRefs`): at most 64, each at most 128 bytes, trimmed, printable, with no
  URL credentials and no repeats; sorted, 16 kept. Otherwise the preview says why.
- A recorded probe: dated in the future (`FutureObservationTime`) or with a policy
  digest that is not `sha256:<64 lowercase hex>` (`MalformedPayload`) is unavailable.
- A capacity fallback reason: only its code (`kubectl.fallback`).

Two entries for one cluster merge their evidence only when it agrees; otherwise it reads
`ConflictingDuplicates`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ome_routing.kubectl.fallback import fallback_code
from ome_routing.kubectl.gotext import go_trim_space, is_control, sanitize
from ome_routing.kubectl.gourl import URLError, parse_url, path_unescape
from ome_routing.kubectl.objects import Probe
from ome_routing.kubectl.placement_values import Value, preview

__all__ = [
    "Drains",
    "ProbeEvidence",
    "drain_evidence",
    "fallback_evidence",
    "merge_drains",
    "merge_fallback",
    "merge_probe",
    "probe_evidence",
]


@dataclass(frozen=True, slots=True)
class Drains:
    refs: tuple[str, ...]
    canonical: tuple[str, ...]
    preview: Value


@dataclass(frozen=True, slots=True)
class ProbeEvidence:
    digest: str = ""
    digest_state: str = "NotRecorded"
    gated: bool = False
    gated_state: str = "NotRecorded"
    issue: str = ""


def _valid_drain_ref(ref: str) -> bool:
    try:
        size = len(ref.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if ref == "" or size > 128 or go_trim_space(ref) != ref:
        return False
    if _has_userinfo(ref) or any(is_control(ch) for ch in ref):
        return False
    return sanitize(ref, 128) == ref


def _has_userinfo(ref: str) -> bool:
    try:
        if parse_url(ref).username is not None:
            return True
    except URLError:
        pass
    candidate = ref
    for _ in range(len(ref) + 1):
        if _authority_has_credentials(candidate):
            return True
        try:
            decoded = path_unescape(candidate)
        except URLError:
            return True
        if decoded == candidate:
            return False
        candidate = decoded
    return False


def _authority_has_credentials(ref: str) -> bool:
    rest, explicit = ref, False
    if rest.startswith("//"):
        rest, explicit = rest[2:], True
    else:
        scheme = rest.find("://")
        if _valid_scheme(rest[:scheme]):
            rest, explicit = rest[scheme + 3 :], True
    authority, has_suffix = rest, False
    for index, char in enumerate(rest):
        if char in "/?#":
            authority, has_suffix = rest[:index], True
            break
    at = authority.rfind("@")
    if at <= 0 or at == len(authority) - 1:
        return False
    if explicit:
        return True
    host = authority[at + 1 :]
    if not has_suffix and not any(ch in host for ch in ".:[]") and host.lower() != "localhost":
        return False
    try:
        return ":" in path_unescape(authority[:at])
    except URLError:
        return True


def _valid_scheme(value: str) -> bool:
    return (
        value[:1].isascii()
        and value[:1].isalpha()
        and all(ch.isascii() and (ch.isalnum() or ch in "+-.") for ch in value)
    )


def drain_evidence(raw: tuple[str, ...]) -> Drains:
    total = len(raw)
    if total > 64:
        return Drains((), (), preview("BudgetExceeded", total=total, truncated=True))
    seen: set[str] = set()
    for ref in raw:
        if not _valid_drain_ref(ref) or ref in seen:
            return Drains((), (), preview("MalformedPayload", total=total))
        seen.add(ref)
    refs = tuple(sorted(raw))
    kept = refs[:16]
    return Drains(kept, refs, preview("Validated", total, len(kept), len(refs) > 16))


def merge_drains(left: Drains, right: Drains) -> Drains:
    total = max(left.preview["total"], right.preview["total"])
    truncated = left.preview["truncated"] or right.preview["truncated"]
    states = (left.preview["state"], right.preview["state"])
    if states[0] == states[1] and states[0] in ("MalformedPayload", "BudgetExceeded"):
        return Drains((), (), preview(states[0], total=total, truncated=truncated))
    if (
        states == ("Validated", "Validated")
        and left.preview["total"] == right.preview["total"]
        and left.preview["truncated"] == right.preview["truncated"]
        and left.canonical == right.canonical
    ):
        return Drains(
            left.refs, left.canonical, preview("Validated", total, len(left.refs), truncated)
        )
    return Drains((), (), preview("ConflictingDuplicates", total=total, truncated=truncated))


def probe_evidence(probe: Probe | None, now: datetime) -> ProbeEvidence:
    if probe is None:
        return ProbeEvidence()
    if probe.last_probe_time is not None and probe.last_probe_time > now:
        return ProbeEvidence(
            digest_state="Unavailable", gated_state="Unavailable", issue="FutureObservationTime"
        )
    digest = probe.policy_digest
    if digest == "":
        return ProbeEvidence(gated=probe.gated, gated_state="Reported")
    hex_digits = digest[len("sha256:") :]
    if (
        len(digest) != 71
        or not digest.startswith("sha256:")
        or any(c not in "0123456789abcdef" for c in hex_digits)
    ):
        return ProbeEvidence(
            digest_state="Unavailable", gated_state="Unavailable", issue="MalformedPayload"
        )
    return ProbeEvidence(digest, "Reported", probe.gated, "Reported")


def merge_probe(left: ProbeEvidence, right: ProbeEvidence) -> ProbeEvidence:
    if left == right and left.issue != "ConflictingDuplicates":
        return left
    return ProbeEvidence(
        digest_state="Unavailable", gated_state="Unavailable", issue="ConflictingDuplicates"
    )


def fallback_evidence(reason: str) -> tuple[str, str]:
    code = str(fallback_code(reason))
    return code, "MalformedPayload" if code == "MalformedPayload" else ""


def merge_fallback(left: tuple[str, str], right: tuple[str, str]) -> tuple[str, str]:
    if left == right and left[1] != "ConflictingDuplicates":
        return left
    return ("ConflictingDuplicates", "ConflictingDuplicates")
