"""OME's checks on publisher journals before a map claims its targets.

A map's journal (`status.publisher`) names the publisher that wrote it and the targets
it claims (`claimedTargets`, `v1:httproute:<ns>/<name>`). Before the publisher claims
anything, OME checks, in this order:

1. **Legacy lifecycle**: a map with no journal of ours is not published while any
   InferenceService still carries the legacy endpoint finalizer
   (`ome.io/placement-endpoint`): `LegacyLifecycleActive`, terminal.
2. **Its own journal**: targets claimed by another publisher (or a retained plan of
   one) mean the publisher changed while claims remain: `PublisherChanged`, terminal.
   A journal that breaks the claim rules (empty, too long, repeated, too many) is
   `ClaimRejected`, terminal.
3. **Every other map's journal** (the union of what it already claims and what the
   plan wants): another map claiming one of them, another map with claims of another
   publisher, or an invalid journal elsewhere: `ClaimRejected`, terminal.

Each check returns a `ClaimProblem` with OME's reason and error text (the text goes to
the log; the condition carries the reason's generic message), or None.

OME lists every map and every InferenceService from the API server for these checks, on
every reconcile. Here `ClaimIndex` keeps what they need from the informers' events (who
claims which target, which maps hold another publisher's or an invalid journal, which
services carry the legacy finalizer), so a check costs the claims it tests rather than
the whole fleet; it reports the same first problem, in the maps' key order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from sys import intern
from typing import Any

from ome_routing.core.publication import LEGACY_FINALIZER
from ome_routing.core.publication_status import Reason
from ome_routing.core.quoting import quote

#: The CRD's limits on a journal (`claimedTargets`: at most 128 items of 1-512 bytes).
MAX_TARGETS = 128
MAX_TARGET_LENGTH = 512

#: OME's sentinel error for a journal written by another publisher.
PUBLISHER_CHANGED = "TrafficMap publisher changed while claims remain"


@dataclass(frozen=True, slots=True)
class ClaimProblem:
    reason: Reason
    error: str


class InvalidClaims(ValueError):
    """A claim list that breaks OME's rules; the message is OME's."""


def normalize_claims(claims: Sequence[Any]) -> list[str]:
    """The claims sorted, or `InvalidClaims` (too many, empty, too long, repeated)."""
    if len(claims) > MAX_TARGETS:
        raise InvalidClaims(f"publisher plan has {len(claims)} targets, maximum is {MAX_TARGETS}")
    normalized = sorted(str(c) for c in claims)
    for index, claim in enumerate(normalized):
        if not claim:
            raise InvalidClaims("publisher target must not be empty")
        size = len(claim.encode())
        if size > MAX_TARGET_LENGTH:
            raise InvalidClaims(
                f"publisher target {quote(claim)} has {size} bytes, maximum is {MAX_TARGET_LENGTH}"
            )
        if index and claim == normalized[index - 1]:
            raise InvalidClaims(f"publisher plan contains duplicate target {quote(claim)}")
    return normalized


def _journal(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    journal = (status or {}).get("publisher")
    return journal if isinstance(journal, Mapping) else None


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def has_journal_of(status: Mapping[str, Any] | None, publisher: str) -> bool:
    """Whether the map's journal is this publisher's (the legacy scan is skipped then)."""
    journal = _journal(status)
    return journal is not None and journal.get("publisherName") == publisher


def legacy_lifecycle_problem(isvcs: Iterable[Mapping[str, Any]]) -> ClaimProblem | None:
    """Step 1: InferenceServices that still carry the legacy endpoint finalizer."""
    return _legacy_problem(
        sum(
            LEGACY_FINALIZER in ((isvc.get("metadata") or {}).get("finalizers") or [])
            for isvc in isvcs
        )
    )


def _legacy_problem(count: int) -> ClaimProblem | None:
    if not count:
        return None
    return ClaimProblem(
        Reason.LEGACY_LIFECYCLE_ACTIVE,
        f"{count} InferenceService(s) retain the legacy endpoint publisher finalizer; "
        "complete their cleanup before publishing TrafficMaps",
    )


def own_journal(
    status: Mapping[str, Any] | None, publisher: str
) -> tuple[list[str], ClaimProblem | None]:
    """Step 2: the targets this map already claims for `publisher`, or the problem."""
    journal = _journal(status)
    if journal is None:
        return [], None
    try:
        claims = normalize_claims(journal.get("claimedTargets") or [])
    except InvalidClaims as err:
        return [], ClaimProblem(Reason.CLAIM_REJECTED, f"invalid publisher journal: {err}")
    name = str(journal.get("publisherName") or "")
    if name != publisher and (claims or journal.get("lastPositive") is not None):
        return [], ClaimProblem(
            Reason.PUBLISHER_CHANGED,
            f"{PUBLISHER_CHANGED}: from {quote(name)} to {quote(publisher)}",
        )
    return claims, None


@dataclass(frozen=True, slots=True)
class _Journal:
    uid: str
    publisher: str
    claims: tuple[str, ...]
    invalid: str | None  # OME's error for a journal that breaks the claim rules


def _summary(obj: Mapping[str, Any]) -> _Journal | None:
    journal = _journal(obj.get("status"))
    if journal is None:
        return None
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    publisher = str(journal.get("publisherName") or "")
    try:
        claims = tuple(normalize_claims(journal.get("claimedTargets") or []))
    except InvalidClaims as err:
        return _Journal(uid, publisher, (), str(err))
    return _Journal(uid, publisher, claims, None)


def _union(claims: Iterable[str]) -> tuple[list[str], ClaimProblem | None]:
    """The claims to hold, sorted, or the problem of holding too many."""
    union = sorted(set(claims))
    if len(union) > MAX_TARGETS:
        return union, ClaimProblem(
            Reason.CLAIM_REJECTED,
            f"publisher claim union has {len(union)} targets, maximum is {MAX_TARGETS}",
        )
    return union, None


def _other_problem(
    key: str, other: _Journal, wanted: Collection[str], publisher: str
) -> ClaimProblem | None:
    """Another map's journal against the claims wanted, in OME's order of checks."""
    if other.invalid is not None:
        return ClaimProblem(
            Reason.CLAIM_REJECTED,
            f"TrafficMap {key} has an invalid publisher journal: {other.invalid}",
        )
    if other.claims and other.publisher != publisher:
        return ClaimProblem(
            Reason.CLAIM_REJECTED,
            f"TrafficMap {key} retains claims for publisher {quote(other.publisher)} "
            f"while publisher {quote(publisher)} is selected",
        )
    for claim in other.claims:
        if claim in wanted:
            return ClaimProblem(
                Reason.CLAIM_REJECTED,
                f"publisher target {quote(claim)} is already claimed by TrafficMap {key}",
            )
    return None


def collision_problem(
    uid: str, claims: Iterable[str], maps: Iterable[Mapping[str, Any]], publisher: str
) -> ClaimProblem | None:
    """Step 3: the union of claims against every other map's journal (maps by key order)."""
    union, problem = _union(claims)
    if problem is not None:
        return problem
    wanted = set(union)
    for other in sorted(maps, key=_key):  # the API server's list order
        journal = _summary(other)
        if journal is None or journal.uid == uid:
            continue
        problem = _other_problem(_key(other), journal, wanted, publisher)
        if problem is not None:
            return problem
    return None


class ClaimIndex:
    """Every map's journal and every legacy-finalized service, kept from watch events.

    `observe_map`/`observe_service` take an object's new version (None when deleted);
    `collision` and `legacy` answer as `collision_problem` and `legacy_lifecycle_problem`
    would over the whole fleet.
    """

    def __init__(self, publisher: str) -> None:
        self._publisher = publisher
        self._journals: dict[str, _Journal] = {}
        #: target -> keys of the maps claiming it (almost always one: a tuple is small)
        self._holders: dict[str, tuple[str, ...]] = {}
        self._odd: set[str] = set()  # maps with an invalid or another publisher's journal
        self._legacy: set[str] = set()  # services with the legacy finalizer

    def observe_map(self, key: str, obj: Mapping[str, Any] | None) -> None:
        key = intern(key)
        old = self._journals.pop(key, None)
        if old is not None:
            for claim in old.claims:
                rest = tuple(k for k in self._holders.get(claim, ()) if k != key)
                if rest:
                    self._holders[claim] = rest
                else:
                    self._holders.pop(claim, None)
            self._odd.discard(key)
        new = _summary(obj) if obj is not None else None
        if new is None:
            return
        self._journals[key] = new
        for claim in new.claims:
            self._holders[claim] = (*self._holders.get(claim, ()), key)
        if new.invalid is not None or (new.claims and new.publisher != self._publisher):
            self._odd.add(key)

    def observe_service(self, key: str, obj: Mapping[str, Any] | None) -> None:
        finalizers = ((obj or {}).get("metadata") or {}).get("finalizers") or []
        if obj is not None and LEGACY_FINALIZER in finalizers:
            self._legacy.add(key)
        else:
            self._legacy.discard(key)

    def legacy(self) -> ClaimProblem | None:
        return _legacy_problem(len(self._legacy))

    def collision(self, uid: str, claims: Iterable[str]) -> ClaimProblem | None:
        union, problem = _union(claims)
        if problem is not None:
            return problem
        candidates = set(self._odd)
        for claim in union:
            candidates.update(self._holders.get(claim, ()))
        wanted = set(union)
        for key in sorted(candidates):  # "ns/name", bytewise, as the API server lists
            journal = self._journals[key]
            if journal.uid == uid:
                continue
            problem = _other_problem(key, journal, wanted, self._publisher)
            if problem is not None:
                return problem
        return None
