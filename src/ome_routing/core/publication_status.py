"""The publisher's part of a TrafficMap's status: conditions, journal, gateway ref; pure.

The publisher owns `Published` and `PublicationFallback`, `published`, `gatewayRef`,
`observedTrafficMapGeneration` and `publisher` (its journal: its name, the targets it
has claimed, the digest of its options). The routing controller owns the rest, so
`publisher_status` changes only these keys of a status and keeps every other one.

Reasons and messages are OME's: a failure's condition carries a generic message per
reason, and the real error goes to the log (`TrafficMap publisher reconciliation
failed`). The built-in publisher keeps no retained plan, so `PublicationFallback` is
never True and the gauge `ome_trafficmap_publication_fallback` stays 0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ome_routing.core.conditions import FALSE, TRUE, Condition, merge_conditions
from ome_routing.core.endpoint import BUILTIN_PUBLISHER

__all__ = [
    "FINALIZER",
    "OPTIONS_DIGEST",
    "PUBLICATION_FALLBACK",
    "PUBLISHED",
    "Outcome",
    "Reason",
    "failure",
    "needs_finalizer",
    "publisher_status",
]

PUBLISHED = "Published"
PUBLICATION_FALLBACK = "PublicationFallback"
UNKNOWN = "Unknown"
FINALIZER = "ome.io/trafficmap-publisher"
#: The digest of the built-in publisher's (empty) options, as OME records it.
OPTIONS_DIGEST = (
    "sha256:"
    + hashlib.sha256(
        json.dumps(
            {"version": "v1", "publisher": BUILTIN_PUBLISHER, "options": {}}, separators=(",", ":")
        ).encode()
    ).hexdigest()
)


class Reason(StrEnum):
    PUBLISHED = "Published"
    TRANSITIONING = "Transitioning"
    WITHDRAWN = "Withdrawn"
    UNPUBLISHED = "Unpublished"
    FINALIZING = "Finalizing"
    UNSUPPORTED = "Unsupported"
    INVALID_OWNER = "InvalidOwner"
    INVALID_OPTIONS = "InvalidOptions"
    INVALID_PLAN = "InvalidPlan"
    LEGACY_LIFECYCLE_ACTIVE = "LegacyLifecycleActive"
    CLAIM_REJECTED = "ClaimRejected"
    DRAIN_FAILED = "DrainFailed"
    APPLY_FAILED = "ApplyFailed"
    UNPUBLISH_FAILED = "UnpublishFailed"
    PUBLISHER_CHANGED = "PublisherChanged"


#: OME's generic message for each failure; the error itself goes to the log.
FAILURE_MESSAGES: dict[Reason, str] = {
    Reason.INVALID_OWNER: "TrafficMap owner identity is invalid or stale",
    Reason.INVALID_OPTIONS: "Publisher options are invalid",
    Reason.INVALID_PLAN: "Publisher plan is invalid",
    Reason.LEGACY_LIFECYCLE_ACTIVE: "Legacy endpoint publisher cleanup is incomplete",
    Reason.CLAIM_REJECTED: "Publisher claims could not be acquired",
    Reason.DRAIN_FAILED: "Publisher could not drain stale targets",
    Reason.APPLY_FAILED: "Publisher could not apply the TrafficMap",
    Reason.UNPUBLISH_FAILED: "Publisher could not remove TrafficMap state",
    Reason.PUBLISHER_CHANGED: "Publisher journal does not match the selected publisher",
}
OTHER_FAILURE = "TrafficMap publisher reconciliation failed"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The two conditions of one situation."""

    published: Condition
    fallback: Condition


def _pair(
    reason: Reason,
    message: str,
    fallback_status: str = FALSE,
    fallback_reason: Reason | None = None,
    fallback_message: str | None = None,
    status: str = FALSE,
) -> Outcome:
    return Outcome(
        Condition(PUBLISHED, status, reason, message),
        Condition(
            PUBLICATION_FALLBACK,
            fallback_status,
            fallback_reason or reason,
            fallback_message if fallback_message is not None else message,
        ),
    )


_APPLYING = "TrafficMap publisher is applying the current plan"
TRANSITIONING = _pair(Reason.TRANSITIONING, _APPLYING, fallback_status=UNKNOWN)
PUBLISHED_OK = _pair(
    Reason.PUBLISHED,
    f'TrafficMap is published by publisher "{BUILTIN_PUBLISHER}"',
    status=TRUE,
    fallback_reason=Reason.UNSUPPORTED,
    fallback_message="The selected publisher does not retain publication plans",
)
WITHDRAWN = _pair(
    Reason.WITHDRAWN,
    f'TrafficMap publication is withdrawn by publisher "{BUILTIN_PUBLISHER}"',
    fallback_message="TrafficMap publication is withdrawn",
)
UNPUBLISHED = _pair(
    Reason.UNPUBLISHED,
    "TrafficMap source is deleting or has opted out of publication",
    fallback_message="TrafficMap publication fallback is inactive",
)
FINALIZING = _pair(Reason.FINALIZING, "TrafficMap publisher is removing external state")
STATE_REMOVED = _pair(
    Reason.UNPUBLISHED,
    "TrafficMap publisher state is removed",
    fallback_reason=Reason.FINALIZING,
    fallback_message="TrafficMap publication fallback is finalized",
)


def failure(reason: Reason) -> Outcome:
    """A failure: `Published` False and `PublicationFallback` Unknown, both with `reason`."""
    return _pair(reason, FAILURE_MESSAGES.get(reason, OTHER_FAILURE), fallback_status=UNKNOWN)


_KEEP = object()


def publisher_status(
    status: Mapping[str, Any],
    generation: int,
    outcome: Outcome,
    now: datetime,
    *,
    claims: Sequence[str] | object | None = _KEEP,
    gateway_ref: Mapping[str, str] | object | None = _KEEP,
    published: bool | object = _KEEP,
    observed: bool = False,
) -> dict[str, Any]:
    """`status` with the publisher's part set; keys left at `_KEEP` stay as they are.

    `claims` None removes the journal; a list sets it (with the publisher's name and
    options digest). `observed` records `generation` as the realized map generation.
    `published` False removes the key, as OME omits it.
    """
    new = dict(status)
    new["conditions"] = merge_conditions(
        status.get("conditions") or [], [outcome.published, outcome.fallback], now, generation
    )
    if claims is None:
        new.pop("publisher", None)
    elif claims is not _KEEP:
        journal = dict(status.get("publisher") or {})
        journal["publisherName"] = BUILTIN_PUBLISHER
        targets = sorted(set(claims))  # type: ignore[call-overload]
        if targets:
            journal["claimedTargets"] = targets
        else:
            journal.pop("claimedTargets", None)
        journal["observedOptionsDigest"] = OPTIONS_DIGEST
        new["publisher"] = journal
    if gateway_ref is None:
        new.pop("gatewayRef", None)
    elif gateway_ref is not _KEEP:
        new["gatewayRef"] = dict(gateway_ref)  # type: ignore[call-overload]
    if published is True:
        new["published"] = True
    elif published is False:
        new.pop("published", None)
    if observed:
        if generation:
            new["observedTrafficMapGeneration"] = generation
        else:
            new.pop("observedTrafficMapGeneration", None)
    return new


def claims_of(status: Mapping[str, Any]) -> list[str]:
    journal = status.get("publisher") or {}
    targets = journal.get("claimedTargets") or []
    return [str(t) for t in targets]


def needs_finalizer(status: Mapping[str, Any]) -> bool:
    """Whether the status records publisher state that the finalizer must protect.

    OME's `publisherStatusNeedsFinalizer` for a stateful publisher (the built-in one is):
    a journal (claims or none), `published`, a `gatewayRef` or a realized generation.
    The publisher puts a missing finalizer back before any gate or check of its own.
    """
    return bool(
        status.get("publisher") is not None
        or status.get("published")
        or status.get("gatewayRef") is not None
        or status.get("observedTrafficMapGeneration")
    )
