"""The demo's health probe steps, after the capacity steps of the specification.

The service gets the guide's probe of `/v1/models` (its timing shortened, so that a gate
closes in seconds), then worker-b's model server stops answering (503): after three
failures in a row its weight drops to 0 and its entry reads `healthy: false`, probe
`Failing`, with the failures counted. Its answer then comes back, and after two passes
in a row the gate lifts. Each state is shown with the guide's Step 3 command.

The capacity steps' outputs are printed before this, unchanged.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from ome_routing_dev.demo import spec
from ome_routing_dev.demo.commands import Commands
from ome_routing_dev.demo.reporters import LoopbackReporters

STEPS = 3
#: The guide's probe, with a period of 2s instead of 10s.
PROBE: dict[str, Any] = {
    "path": "/v1/models",
    "method": "GET",
    "acceptStatuses": [200],
    "gateStatuses": [404, 500, 502, 503, 504],
    "period": "2s",
    "timeout": "1s",
    "failureThreshold": 3,
    "successThreshold": 2,
    "allFailedPolicy": "PreserveTraffic",
}
#: The guide's Step 3 command.
PROBE_STATE = (
    f"kubectl get trafficmap {spec.NAME} -n {spec.NAMESPACE} \\\n"
    '  -o jsonpath=\'{range .spec.entries[*]}{.cluster}{" "}{.weight}{" "}{.healthy}'
    '{" "}{.probe.result}{" "}{.probe.message}{"\\n"}{end}\''
)
GATE_STATE = (
    f"kubectl get trafficmap {spec.NAME} -n {spec.NAMESPACE} \\\n"
    '  -o jsonpath=\'{range .spec.entries[*]}{.cluster}{": gated="}{.probe.gated}'
    '{" consecutiveFailures="}{.probe.consecutiveFailures}{"\\n"}{end}\''
)
TIMEOUT = 60.0


def _probe(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    probe = entry.get("probe")
    return probe if isinstance(probe, Mapping) else {}


def _entries(tmap: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    entries = (tmap.get("spec") or {}).get("entries") or []
    return {str(e.get("cluster")): e for e in entries}


def all_passing(tmap: Mapping[str, Any]) -> bool:
    entries = _entries(tmap)
    return bool(entries) and all(
        _probe(e).get("result") == "Passing" and not _probe(e).get("gated")
        for e in entries.values()
    )


def gated(cluster: str) -> Callable[[Mapping[str, Any]], bool]:
    def done(tmap: Mapping[str, Any]) -> bool:
        entry = _entries(tmap).get(cluster, {})
        return (
            _probe(entry).get("gated") is True
            and entry.get("weight") == 0
            and entry.get("healthy") is False
        )

    return done


def run_probe_steps(demo: Commands, reporters: LoopbackReporters) -> None:
    """Probe the homes, gate worker-b, and let it back in."""
    say = demo.say
    say.step("Probe each home's model server at /v1/models (the probes guide, Step 2)")
    say.say(
        "The guide's probe, with a 2s period instead of 10s: three failures in a row gate a "
        "home, two passes in a row let it back in."
    )
    patch = json.dumps({"spec": {"routing": {"probe": PROBE}}}, separators=(",", ":"))
    demo.run_command(
        f"kubectl patch inferenceservice {spec.NAME} -n {spec.NAMESPACE} "
        f"--type=merge -p {shlex.quote(patch)}"
    )
    demo.wait_for(all_passing, TIMEOUT, "both homes to pass their probe")
    demo.run_command(PROBE_STATE)

    say.step("Stop worker-b's health answer: its model server answers 503")
    reporters["worker-b"].health.switch(503)
    demo.wait_for(gated("worker-b"), TIMEOUT, "worker-b to be gated")
    demo.run_command(PROBE_STATE)
    demo.run_command(GATE_STATE)
    say.say(
        "OK: worker-b is gated: weight 0, healthy false, probe Failing after 3 failures "
        "in a row; worker-a takes all the traffic."
    )

    say.step("Bring worker-b's health answer back")
    reporters["worker-b"].health.switch(200)
    demo.wait_for(all_passing, TIMEOUT, "worker-b's gate to lift")
    demo.run_command(PROBE_STATE)
    say.say("OK: two passes in a row lifted the gate; worker-b has its weight back.")
