"""The probe spec the tests start from: the guide's Step 1 probe ("Configure routing health
probes"), which is also OME's commented example in the chart's values.yaml.

`guide_probe()` returns a fresh copy, with any field changed, so that no test can change
another's spec in place.
"""

from __future__ import annotations

from typing import Any

_GUIDE_PROBE: dict[str, Any] = {
    "path": "/v1/models",
    "method": "GET",
    "acceptStatuses": [200],
    "gateStatuses": [404, 500, 502, 503, 504],
    "period": "10s",
    "timeout": "3s",
    "failureThreshold": 3,
    "successThreshold": 2,
    "allFailedPolicy": "PreserveTraffic",
}


def guide_probe(**changes: Any) -> dict[str, Any]:
    """The guide's probe (lists copied too), with `changes` set."""
    probe = {k: list(v) if isinstance(v, list) else v for k, v in _GUIDE_PROBE.items()}
    probe.update(changes)
    return probe
