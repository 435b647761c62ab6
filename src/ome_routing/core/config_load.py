"""Reading the multi-cluster block before any rule: by type, its unknown keys, its durations.

Steps 2 and 3 of `core.config`'s order, as OME takes them:

- `load_blocks`: every routing block read by type, as OME's JSON decoding does (a value
  of the wrong type raises `CapacityRuleError`, which `core.config` reports with OME's
  load prefix); nothing is judged yet.
- `unknown_key_warnings`: one line per key OME ignores, at each level that is a mapping.
- `duration_problems`, `check_resync`: every set duration parsed, in the byte order of its
  key, all errors together; then `routing.publisher.resyncInterval`.

Pure: values in, values and messages out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ome_routing.core.durations import MINUTE, Duration, DurationError, parse_duration
from ome_routing.core.endpoint import (
    ENDPOINT_KEYS,
    GATEWAY_BACKEND_KEYS,
    REFRESH_FIELD,
    EndpointConfig,
    load_endpoint,
)
from ome_routing.core.fields import (
    ZERO,
    duration_text,
    go_q,
    not_a_duration,
    read_bool,
    read_mapping,
    read_string,
    read_string_map,
    unknown_fields,
)
from ome_routing.core.journalrules import JOURNAL_FIELD, JOURNAL_KEYS
from ome_routing.core.pollrules import (
    CAPACITY_FIELDS,
    CHART_CAPACITY_FIELD,
    MISSING,
    OBSERVER_FIELD,
    PollFields,
    load_observer,
    read_poll,
)
from ome_routing.core.proberules import CHART_PROBE_FIELD, PROBE_FIELDS, ProbeFields, read_probe
from ome_routing.core.ramps import RAMP_FIELDS
from ome_routing.core.trustrules import TRUST_KEYS

PUBLISHER_FIELD = "routing.publisher"
RESYNC_FIELD = f"{PUBLISHER_FIELD}.resyncInterval"
#: The chart's default for `routing.publisher.resyncInterval`, kept when the key is left
#: out: the publisher's safety resync, for state that no watch event repairs.
DEFAULT_RESYNC_INTERVAL = Duration(MINUTE)

#: The keys OME reads at each level; any other key is ignored with a warning.
_KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "multicluster": ("enabled", "role", "config"),
    "": ("workloadCluster", "placement", "endpoint", "routing"),
    "routing": ("enabled", "observer", "probe", "capacity", "publisher"),
    JOURNAL_FIELD: JOURNAL_KEYS,
    OBSERVER_FIELD: (
        "maxConcurrentReconciles",
        "maxConcurrentRequests",
        "maxResponseBytes",
        "minPeriod",
        "maxSamples",
        *TRUST_KEYS,
    ),
    CHART_CAPACITY_FIELD: CAPACITY_FIELDS,
    CHART_PROBE_FIELD: PROBE_FIELDS,
    PUBLISHER_FIELD: ("name", "resyncInterval", "options"),
    "routing.ramp": RAMP_FIELDS,
    "endpoint": ENDPOINT_KEYS,
    "endpoint.gatewayBackend": GATEWAY_BACKEND_KEYS,
}


#: Our own keys (not OME's) at a level: never warned about, and left out of the warning's
#: list of known keys, so that the line is OME's as long as none is set.
_OUR_KEYS: dict[str, tuple[str, ...]] = {
    "routing": ("shadow", "journal", "ramp"),
}


def unknown_setting(path: str, known: tuple[str, ...]) -> str:
    """The warning for a key that is ignored."""
    return f"unknown multi-cluster setting {path} is ignored (known: {', '.join(known)})"


# --- unknown keys ----------------------------------------------------------------------


def unknown_key_warnings(multicluster: Mapping[str, Any]) -> tuple[str, ...]:
    """A warning per unknown key, walking only the levels that are mappings."""
    lines: list[str] = []

    def visit(block: object, level: str, path: str) -> None:
        if not isinstance(block, Mapping):
            return
        known = _KNOWN_KEYS[level]
        for key in unknown_fields(block, (*known, *_OUR_KEYS.get(level, ()))):
            lines.append(unknown_setting(f"{path}{key}", known))

    visit(multicluster, "multicluster", "multicluster.")
    config = multicluster.get("config")
    visit(config, "", "")
    endpoint = config.get("endpoint") if isinstance(config, Mapping) else None
    visit(endpoint, "endpoint", "endpoint.")
    if isinstance(endpoint, Mapping):
        visit(endpoint.get("gatewayBackend"), "endpoint.gatewayBackend", "endpoint.gatewayBackend.")
    routing = config.get("routing") if isinstance(config, Mapping) else None
    visit(routing, "routing", "routing.")
    if isinstance(routing, Mapping):
        for name in ("observer", "capacity", "probe", "publisher", "journal", "ramp"):
            level = f"routing.{name}"
            visit(routing.get(name), level, f"{level}.")
    return tuple(lines)


# --- durations, reported together -------------------------------------------------------


def duration_problems(texts: Mapping[str, str]) -> list[str]:
    """OME's duration check: each set duration, in byte order of its key."""
    problems: list[str] = []
    for key in sorted(texts):
        text = texts[key]
        if text == "":
            continue
        try:
            value = parse_duration(text)
        except DurationError:
            problems.append(not_a_duration(key, text))
            continue
        if value.nanoseconds <= 0:
            problems.append(f"{key}: {go_q(text)} must be positive")
    return problems


def check_resync(text: str, routing_enabled: bool) -> tuple[Duration, str | None]:
    """`routing.publisher.resyncInterval`: required and positive while routing is on."""
    if text == "":
        if routing_enabled:
            return ZERO, f"{RESYNC_FIELD}: must be positive when routing is enabled"
        return ZERO, None
    try:
        value = parse_duration(text)
    except DurationError:
        return ZERO, not_a_duration(RESYNC_FIELD, text)
    if value.nanoseconds < 0 or (routing_enabled and value.nanoseconds == 0):
        return value, (
            f"{RESYNC_FIELD}: {go_q(text)} must be positive when routing is enabled "
            "and non-negative otherwise"
        )
    return value, None


def _raw_block(value: object, name: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return MappingProxyType(dict(read_mapping(value, name)))


def optional_bool(block: Mapping[str, Any], key: str, name: str) -> bool:
    value = block.get(key)
    return False if value is None else read_bool(value, name)


def _optional_mapping(block: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any]:
    value = block.get(key)
    return {} if value is None else read_mapping(value, name)


@dataclass(frozen=True, slots=True)
class Loaded:
    """The routing blocks, read by type and not yet judged."""

    routing_enabled: bool
    observer: dict[str, int | str]
    poll: PollFields
    probe: Mapping[str, Any] | None
    probe_fields: ProbeFields
    publisher: Mapping[str, Any] | None
    #: Every duration that OME checks at load, by key as users spell it.
    durations: dict[str, str]
    resync_text: str
    endpoint: EndpointConfig
    #: `routing.observer` as written, for our transport settings (`core.trustrules`)
    observer_block: object = None
    #: Not OME: `routing.shadow`, the chart-wide shadow policy (`core.shadow`), as written
    shadow: Mapping[str, Any] | None = None


def load_blocks(block: Mapping[str, Any]) -> Loaded:
    """Read `config` by type, as OME's JSON decoding does; raises `CapacityRuleError`."""
    config = _optional_mapping(block, "config", "config")
    routing = _optional_mapping(config, "routing", "routing")
    routing_enabled = optional_bool(routing, "enabled", "routing.enabled")
    observer = load_observer(routing.get("observer", MISSING))
    capacity_block = _optional_mapping(routing, "capacity", CHART_CAPACITY_FIELD)
    poll = read_poll(capacity_block, CHART_CAPACITY_FIELD, strict_durations=False)
    probe = _raw_block(routing.get("probe"), CHART_PROBE_FIELD)
    probe_fields = read_probe(probe or {}, CHART_PROBE_FIELD, strict_durations=False)
    publisher = _raw_block(routing.get("publisher"), PUBLISHER_FIELD)
    publisher_block = publisher or {}
    if publisher_block.get("name") is not None:
        read_string(publisher_block["name"], f"{PUBLISHER_FIELD}.name")
    read_string_map(publisher_block.get("options"), f"{PUBLISHER_FIELD}.options")
    resync_text = (
        duration_text(publisher_block.get("resyncInterval"), RESYNC_FIELD)
        if "resyncInterval" in publisher_block
        else str(DEFAULT_RESYNC_INTERVAL)
    )
    durations = {
        f"{CHART_CAPACITY_FIELD}.{key}": duration_text(
            capacity_block.get(key), f"{CHART_CAPACITY_FIELD}.{key}"
        )
        for key in ("period", "timeout", "maxAge")
    }
    durations[f"{OBSERVER_FIELD}.minPeriod"] = str(observer["minPeriod"])
    for key in ("period", "timeout"):
        name = f"routing.probe.{key}"
        durations[name] = duration_text((probe or {}).get(key), name)
    endpoint = load_endpoint(config.get("endpoint"))
    durations[REFRESH_FIELD] = endpoint.address_refresh_interval
    return Loaded(
        routing_enabled,
        observer,
        poll,
        probe,
        probe_fields,
        publisher,
        durations,
        resync_text,
        endpoint,
        routing.get("observer"),
        _raw_block(routing.get("shadow"), "routing.shadow"),
    )
