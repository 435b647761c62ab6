"""A shadow routing policy: a candidate `spec.routing`, judged on live inputs, never published.

Not OME's (OME has nothing like it); all of it is off until an operator sets one:

- Where it comes from (`shadow_source`): the InferenceService's annotation
  `routing.ome-routing.io/shadow-routing` (a JSON object shaped like `spec.routing`), else
  the chart's `shadowRouting` (config `routing.shadow`); the annotation wins as a whole.
- What it is (`candidate_routing`): the service's own `spec.routing` with each block the
  shadow sets put in its place (a block set to null is taken away), resolved against the
  chart exactly as `spec.routing` is (`core.policy`), so its errors are OME's, with the
  field named by where the shadow came from (`routing.shadow.capacity.quorum`).
- What it reads: the live policy's readings and probe results, never its own. Its
  ceiling (`shadow_verdict`) is judged on the live window's readings with the shadow's
  `samples`, `quorum` and `maxAge`: it sees at most the readings the live window keeps
  (the live `samples`, younger than the live `maxAge` at the last poll), so a shadow
  `samples` above the live one counts as the live one, and a shadow `quorum` above the
  live `samples` never reaches quorum. Its probe gates are the live probe's states; its
  own `allFailedPolicy` applies to them. Fields that shape only requests (the poll's and
  the probe's `path`, `method`, `period`, `timeout`, `format`, `options`, the probe's
  statuses and thresholds, the publisher block) cannot change the shadow's result:
  `not_evaluated` lists those that differ from live.
- What it gives (`compare`): per home, the live and shadow weight and share and why they
  differ.

Pure: no I/O, no clock. Errors: `ShadowError` (a `ValueError`) whose text names the field
and value; the caller logs it and leaves the shadow off for that service.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from ome_routing.core.capacity import NO_REPORT_YET, Verdict, Window, WindowSettings, verdict
from ome_routing.core.config import ConfigError, OperatorConfig
from ome_routing.core.fields import go_q
from ome_routing.core.policy import (
    ROUTING_FIELD,
    PolicyError,
    RoutingPolicy,
    resolve_routing_policy,
)
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.trafficmap import Entry

GROUP = "routing.ome-routing.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ShadowTrafficMap"
ANNOTATION = f"{GROUP}/shadow-routing"
ANNOTATION_FIELD = f'metadata.annotations["{ANNOTATION}"]'
#: the key in the controller's config (the chart's `shadowRouting`)
CONFIG_FIELD = "routing.shadow"

#: why a field that differs from live changes nothing in the shadow's result
NOT_EVALUATED = "not evaluated (the shadow never polls or probes)"
LIVE_DOES_NOT_POLL = "not evaluated (the live policy does not poll: no readings to judge)"
LIVE_DOES_NOT_PROBE = "not evaluated (the live policy does not probe: no probe results)"


class ShadowError(ValueError):
    """A shadow policy that cannot be used; `str(error)` is the whole log line."""


@dataclass(frozen=True, slots=True)
class ShadowSource:
    """A shadow block and the field it was read from, as errors name it."""

    field: str
    block: Mapping[str, Any]


#: The most bytes a shadow annotation may hold: a `spec.routing` block is a few hundred; the
#: API server allows 256 KiB of annotations, which a tenant's service must not make us parse
MAX_ANNOTATION_BYTES = 32 * 1024
#: how much of an oversized or unparsable value an error quotes
_SHOWN = 64


def read_block(value: object, field_name: str) -> Mapping[str, Any]:
    """A shadow block: a JSON object (text for the annotation, a mapping for the chart)."""
    if isinstance(value, str):
        text = value
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_ANNOTATION_BYTES:
            raise ShadowError(
                f"{field_name}: {go_q(text[:_SHOWN])}... is {size} bytes, more than the limit "
                f"of {MAX_ANNOTATION_BYTES}"
            )
        try:
            value = json.loads(text)
        except ValueError as err:
            raise ShadowError(f"{field_name}: {go_q(text)} is not a JSON object: {err}") from None
        except RecursionError:  # nesting too deep for the parser: not a routing block
            raise ShadowError(
                f"{field_name}: {go_q(text[:_SHOWN])}... is not a JSON object: nested too deeply"
            ) from None
    if not isinstance(value, Mapping):
        shown = json.dumps(value) if not isinstance(value, str) else go_q(value)
        raise ShadowError(f"{field_name}: {shown} must be an object shaped like {ROUTING_FIELD}")
    return value


def shadow_source(
    annotations: Mapping[str, Any] | None, chart: Mapping[str, Any] | None
) -> ShadowSource | None:
    """The service's shadow block: its annotation, else the chart's; None when neither is set.

    Raises `ShadowError` for an annotation that is not a JSON object.
    """
    value = (annotations or {}).get(ANNOTATION)
    if value is not None:
        return ShadowSource(ANNOTATION_FIELD, read_block(value, ANNOTATION_FIELD))
    if chart:
        return ShadowSource(CONFIG_FIELD, chart)
    return None


def candidate_routing(live: Mapping[str, Any] | None, source: ShadowSource) -> dict[str, Any]:
    """The service's `spec.routing` with the shadow's blocks in place of its own."""
    merged = dict(live) if isinstance(live, Mapping) else {}
    merged.update(source.block)
    return {key: value for key, value in merged.items() if value is not None}


def _renamed(message: str, field_name: str) -> str:
    """A policy error with `spec.routing` named as the shadow's field."""
    return message.replace(ROUTING_FIELD, field_name)


def resolve_shadow(
    live: Mapping[str, Any] | None, source: ShadowSource, config: OperatorConfig
) -> RoutingPolicy:
    """The shadow policy of a service whose `spec.routing` is `live`.

    Raises `ShadowError` with the policy's own message, the field renamed.
    """
    try:
        return resolve_routing_policy(candidate_routing(live, source), config)
    except PolicyError as err:
        raise ShadowError(_renamed(str(err), source.field)) from None


def check_chart_shadow(block: object, config: OperatorConfig) -> Mapping[str, Any] | None:
    """`routing.shadow` read and resolved as the `spec.routing` of a service that sets none.

    None when it is unset or empty. Raises `ShadowError`.
    """
    if block is None:
        return None
    mapping = read_block(block, CONFIG_FIELD)
    if not mapping:
        return None
    resolve_shadow(None, ShadowSource(CONFIG_FIELD, mapping), config)
    return mapping


def checked_config(config: OperatorConfig) -> OperatorConfig:
    """`config`, once its chart-wide shadow (`routing.shadow`) resolves; raises `ConfigError`.

    Checked as the controller starts and by `validate-config`, only while routing runs.
    """
    if not config.routing_active or not config.shadow:
        return config
    try:
        check_chart_shadow(config.shadow, config)
    except ShadowError as err:
        raise ConfigError(str(err), config.warnings) from None
    return config


def shadow_verdict(live: Window | None, poll: CapacityPolicy, now: datetime) -> Verdict:
    """The shadow's ceiling at `now`, judged on the live window's readings with its settings.

    The last `samples` of the live readings count (at most as many as the live window
    keeps); a live window emptied by a failed poll shows the same reason (a stale one as
    the shadow's `maxAge` words it). Without a live window, there is no report yet.
    """
    if live is None:
        return Verdict(None, NO_REPORT_YET)
    settings = WindowSettings(samples=poll.samples, quorum=poll.quorum, max_age=poll.max_age)
    readings = live.readings[-poll.samples :]
    return verdict(Window(settings, readings, live.failure, live.stale), now)


# --- what the shadow cannot evaluate ---------------------------------------------------

_POLL_REQUEST_FIELDS = ("path", "method", "format", "period", "timeout", "options")
_PROBE_REQUEST_FIELDS = (
    ("path", "path"),
    ("method", "method"),
    ("acceptStatuses", "accept_statuses"),
    ("gateStatuses", "gate_statuses"),
    ("period", "period"),
    ("timeout", "timeout"),
    ("failureThreshold", "failure_threshold"),
    ("successThreshold", "success_threshold"),
)


def not_evaluated(live: RoutingPolicy, shadow: RoutingPolicy) -> tuple[tuple[str, str], ...]:
    """(field, why) for each shadow setting that differs from live but cannot act."""
    found: list[tuple[str, str]] = []
    live_poll, shadow_poll = live.capacity, shadow.capacity
    if shadow_poll is not None:
        if live_poll is None:
            found.append(("capacity", LIVE_DOES_NOT_POLL))
        else:
            for name in _POLL_REQUEST_FIELDS:
                if getattr(live_poll, name) != getattr(shadow_poll, name):
                    found.append((f"capacity.{name}", NOT_EVALUATED))
    live_probe, shadow_probe = live.probe_policy, shadow.probe_policy
    if shadow_probe is not None:
        if live_probe is None:
            found.append(("probe", LIVE_DOES_NOT_PROBE))
        else:
            found.extend(
                (f"probe.{name}", NOT_EVALUATED)
                for name, attribute in _PROBE_REQUEST_FIELDS
                if _probe_value(live_probe, attribute) != _probe_value(shadow_probe, attribute)
            )
    if (live.publisher or None) != (shadow.publisher or None):
        found.append(("publisher", NOT_EVALUATED))
    return tuple(found)


def _probe_value(probe: ProbePolicy, attribute: str) -> object:
    value = getattr(probe, attribute)
    return tuple(sorted(set(value))) if isinstance(value, tuple) else value


# --- the comparison ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HomeDifference:
    """One home, live beside shadow."""

    cluster: str
    live_weight: int
    shadow_weight: int
    live_share: Fraction
    shadow_share: Fraction
    #: why they differ, in words; empty when the shares are equal
    reason: str

    @property
    def divergent(self) -> bool:
        return self.live_share != self.shadow_share


def shares(weights: Sequence[int]) -> list[Fraction]:
    """Each weight's share of the total (0 for every home while the total is 0)."""
    total = sum(weights)
    return [Fraction(w, total) if total else Fraction(0) for w in weights]


def format_share(share: Fraction) -> str:
    """A share as a percentage with one decimal, as the diff prints it: `66.7%`."""
    tenths = round(share * 1000)
    return f"{tenths // 10}.{tenths % 10}%"


def _ceiling_words(entry: Entry) -> str:
    capacity = entry.capacity
    if capacity.reported is not None:
        return f"ceiling {capacity.reported}"
    if capacity.fallback_reason is not None:
        return f"no ceiling ({capacity.fallback_reason})"
    return "no poll"


def _reasons(live: Entry, shadow: Entry) -> list[str]:
    reasons: list[str] = []
    if (live.capacity.reported, live.capacity.fallback_reason) != (
        shadow.capacity.reported,
        shadow.capacity.fallback_reason,
    ):
        reasons.append(f"live {_ceiling_words(live)}, shadow {_ceiling_words(shadow)}")
    if live.capacity.factor != shadow.capacity.factor:
        reasons.append(
            f"capacityFactor {live.capacity.factor or 1} -> {shadow.capacity.factor or 1}"
        )
    if live.healthy != shadow.healthy:
        reasons.append(
            "shadow probe gates the home" if live.healthy else "shadow probe does not gate it"
        )
    if not reasons and live.weight and not shadow.weight and not shadow.drain_refs:
        reasons.append("the shadow gives it no routable capacity")
    return reasons


def compare(live: Sequence[Entry], shadow: Sequence[Entry]) -> tuple[HomeDifference, ...]:
    """Every home of either table, by cluster, with why its share differs."""
    live_by = {e.cluster: e for e in live}
    shadow_by = {e.cluster: e for e in shadow}
    live_shares = dict(zip(live_by, shares([e.weight for e in live]), strict=True))
    shadow_shares = dict(zip(shadow_by, shares([e.weight for e in shadow]), strict=True))
    homes: list[HomeDifference] = []
    for cluster in sorted({*live_by, *shadow_by}):
        live_entry, shadow_entry = live_by.get(cluster), shadow_by.get(cluster)
        live_share = live_shares.get(cluster, Fraction(0))
        shadow_share = shadow_shares.get(cluster, Fraction(0))
        reason = ""
        if live_share != shadow_share:
            if live_entry is None or shadow_entry is None:
                reason = (
                    "not in the live table" if live_entry is None else "not in the shadow table"
                )
            else:
                reason = "; ".join(_reasons(live_entry, shadow_entry)) or (
                    "the other homes' weights differ"
                )
        homes.append(
            HomeDifference(
                cluster=cluster,
                live_weight=live_entry.weight if live_entry is not None else 0,
                shadow_weight=shadow_entry.weight if shadow_entry is not None else 0,
                live_share=live_share,
                shadow_share=shadow_share,
                reason=reason,
            )
        )
    return tuple(homes)


def difference_to_json(home: HomeDifference) -> dict[str, Any]:
    """A home of the ShadowTrafficMap's `status.homes`."""
    result: dict[str, Any] = {
        "cluster": home.cluster,
        "liveWeight": home.live_weight,
        "shadowWeight": home.shadow_weight,
        "liveShare": format_share(home.live_share),
        "shadowShare": format_share(home.shadow_share),
    }
    if home.reason:
        result["reason"] = home.reason
    return result
