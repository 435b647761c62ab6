"""`kubectl ome placement endpoint` shows each home's recorded probe, as OME's CLI does."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ome_routing.kubectl.placement import endpoint_report, endpoint_rows

NOW = datetime(2026, 9, 28, 10, 0, 30, tzinfo=UTC)
DIGEST = "sha256:0a3bbc1f65ab1d3e469f4cfb714a1cfea0e1d9e27d7241255af83022da31b76f"


def a_map(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "qwen3-0-6b", "namespace": "qwen3-0-6b", "generation": 2},
        "spec": {"service": "qwen3-0-6b", "entries": list(entries)},
        "status": {},
    }


def an_entry(cluster: str, probe: dict[str, Any] | None, weight: int = 1) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "cluster": cluster,
        "endpoint": f"http://{cluster}.example.com",
        "weight": weight,
        "healthy": not (probe or {}).get("gated", False),
        "capacity": {"allocated": 2, "ready": 2, "source": "ControlPlane"},
    }
    if probe is not None:
        entry["probe"] = probe
    return entry


GATED = {
    "policyDigest": DIGEST,
    "result": "Failing",
    "gated": True,
    "lastProbeTime": "2026-09-28T10:00:25Z",
    "consecutiveFailures": 3,
    "message": "HTTP 503",
}
PASSING = {"policyDigest": DIGEST, "result": "Passing", "message": "HTTP 200"}
TMAP = a_map(
    an_entry("worker-a", PASSING), an_entry("worker-b", GATED, weight=0), an_entry("worker-c", None)
)


def rows(wide: bool = False) -> list[tuple[str, str]]:
    return endpoint_rows(endpoint_report(TMAP, NOW), wide=wide)


def values(field: str, wide: bool = False) -> list[str]:
    return [value for name, value in rows(wide) if name == field]


def test_each_home_shows_its_recorded_probe_gate_and_policy() -> None:
    assert values("Recorded probe") == ["Passing", "Failing", "NotRecorded"]
    assert values("Route evidence") == [
        "drains=0; gate=False; fallback=NotRecorded",
        "drains=0; gate=True; fallback=NotRecorded",
        "drains=0; gate=NotRecorded; fallback=NotRecorded",
    ]
    assert values("Probe policy") == [DIGEST, DIGEST, "NotRecorded"]
    assert values("Final weight")[1] == "0; healthy=false"
    assert values("Probe gate") == []


def test_wide_adds_the_rest_of_the_probe() -> None:
    assert values("Probe gate", wide=True) == ["False (Reported)", "True (Reported)", "NotRecorded"]
    assert values("Probe freshness", wide=True) == [
        "NotRecorded",
        "2026-09-28T10:00:25Z (5s ago)",
        "NotRecorded",
    ]
    assert values("Probe failures", wide=True) == ["0", "3", "NotRecorded"]
    assert values("Probe message", wide=True) == ["HTTP 200", "HTTP 503", "-"]


def test_json_carries_the_probe_block_whole() -> None:
    report = json.loads(json.dumps(endpoint_report(TMAP, NOW)))
    assert report["homes"][1]["probe"] == GATED
    assert "probe" not in report["homes"][2]


def test_a_result_outside_omes_enum_is_invalid() -> None:
    odd = a_map(an_entry("worker-a", {"result": "Flaky"}))
    assert [
        v for n, v in endpoint_rows(endpoint_report(odd, NOW), wide=False) if n == "Recorded probe"
    ] == ["Invalid"]
