"""The demo's global endpoint: the TrafficMap published to a real gateway, and real requests.

With `ome-routing demo --traffic`, each home gets a hostname of its own
(`qwen3-0-6b.qwen3-0-6b.worker-a.example.com`) mapped to its own 127.x.y.z address, where
its reporter also answers as its model server (`served by worker-a`). The controller runs
with the publisher on, and both it and the gateway run in a private mount namespace that
resolves those names from a hosts file and sends any DNS query to a local recorder, never
to a real server. With Traefik (`--gateway traefik`, the default) the publisher writes
hostname EndpointSlices (Traefik refuses OME's ExternalName backends) and the split is
exact; with Contour and Envoy (`--gateway contour`) it writes OME's default ExternalName
backends, and Envoy draws each request, so the split is judged by a binomial test
(`demo.splits`). After Step 3 the demo sends requests to the global host through the
gateway, prints how many each home served next to the TrafficMap's weights, lowers a
reporter's count, and shows the split follow.

The helpers are pure; `send` makes the requests and `TrafficSteps` runs the two steps.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ome_routing_dev.demo import spec
from ome_routing_dev.demo.narration import Narrator
from ome_routing_dev.demo.reporters import SERVED_BY, LoopbackReporters
from ome_routing_dev.demo.splits import (
    FALSE_FAILURE,
    acceptance,
    expected_split,
    split_is_plausible,
)
from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_contour import ContourGateway

HOST_TEMPLATE = "{{ .Name }}.{{ .Namespace }}.global.example.com"
GLOBAL_HOST = f"{spec.NAME}.{spec.NAMESPACE}.global.example.com"
REQUESTS = 300


def home_host(cluster: str) -> str:
    """The home's endpoint host on its workload cluster."""
    return f"{spec.NAME}.{spec.NAMESPACE}.{cluster}.example.com"


def home_addresses(clusters: list[str]) -> dict[str, str]:
    """One loopback address per home, in a /24 of 127.0.0.0/8 picked at random."""
    prefix = f"127.{random.randrange(100, 250)}.{random.randrange(1, 255)}"
    return {cluster: f"{prefix}.{index}" for index, cluster in enumerate(clusters, start=1)}


def with_endpoint(
    values: Mapping[str, Any],
    gateway_ref: str,
    backend_port: int,
    hostname_endpoint_slices: bool = True,
) -> dict[str, Any]:
    """The chart values of Step 1 plus the publisher's `endpoint` block for the demo's gateway
    (OME's default ExternalName backends unless `hostname_endpoint_slices`)."""
    endpoint: dict[str, Any] = {
        "globalGateway": gateway_ref,
        "backendPort": backend_port,
        "globalHostTemplate": HOST_TEMPLATE,
    }
    if hostname_endpoint_slices:
        endpoint["gatewayBackend"] = {"hostnameEndpointSlices": True}
    merged = dict(values)
    ome = dict(merged.get("ome") or {})
    multicluster = dict(ome.get("multicluster") or {})
    config = dict(multicluster.get("config") or {})
    config["endpoint"] = endpoint
    multicluster["config"], ome["multicluster"], merged["ome"] = config, multicluster, ome
    return merged


def route_weights(route: Mapping[str, Any]) -> list[int]:
    """The backendRefs' weights of the HTTPRoute's first rule, in order."""
    rules = (route.get("spec") or {}).get("rules") or [{}]
    return [int(ref.get("weight", 1)) for ref in rules[0].get("backendRefs") or []]


def tally(answers: list[tuple[int, str]]) -> Counter[str]:
    """How many answers each home served; anything else counts under its status."""
    counts: Counter[str] = Counter()
    for status, body in answers:
        if status == 200 and body.startswith(SERVED_BY):
            counts[body.removeprefix(SERVED_BY)] += 1
        else:
            counts[f"HTTP {status}"] += 1
    return counts


def format_split(counts: Counter[str], weights: Mapping[str, int], requests: int) -> str:
    """One line per home: requests served, share, and its weight; then any other answers."""
    total = sum(weights.values())
    lines = [f"{'HOME':<10}{'SERVED':>8}{'SHARE':>8}   WEIGHT"]
    for cluster, weight in sorted(weights.items()):
        share = counts.get(cluster, 0) / requests if requests else 0.0
        lines.append(f"{cluster:<10}{counts.get(cluster, 0):>8}{share:>8.1%}   {weight} of {total}")
    for other, count in sorted(counts.items()):
        if other not in weights:
            lines.append(f"{other:<10}{count:>8}")
    return "\n".join(lines)


def describe_gateway(say: Narrator, gateway: SandboxedGateway) -> None:
    if isinstance(gateway, ContourGateway):
        say.say(
            f"Contour serves the Gateway {gateway.gateway_ref} through Envoy at "
            f"http://127.0.0.1:{gateway.port}; the publisher writes OME's default ExternalName "
            "backends, and each home's hostname resolves to its own address in Envoy's "
            "private hosts file:"
        )
    else:
        say.say(
            f"Traefik serves the Gateway {gateway.gateway_ref} at "
            f"http://127.0.0.1:{gateway.port}; each home's hostname resolves to its own "
            "address in Traefik's private hosts file:"
        )
    say.output("\n".join(f"{a}  {h}" for h, a in sorted(gateway.sandbox.hosts.items())))


def write_values(
    say: Narrator, step1: Path, path: Path, gateway: SandboxedGateway, backend_port: int
) -> None:
    """Write Step 1's values plus the endpoint block to `path`, and show the block."""
    merged = with_endpoint(
        yaml.safe_load(step1.read_text()),
        gateway.gateway_ref,
        backend_port,
        gateway.needs_hostname_endpoint_slices,
    )
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    say.say(f"Step 1's values plus the publisher's endpoint block, in {path}:")
    endpoint = merged["ome"]["multicluster"]["config"]["endpoint"]
    say.output(yaml.safe_dump({"endpoint": endpoint}, sort_keys=False))


def send(gateway: SandboxedGateway, requests: int) -> Counter[str]:
    """`requests` GETs to the global host through the gateway, one after another."""
    return tally([gateway.get(GLOBAL_HOST) for _ in range(requests)])


class TrafficSteps:
    """The demo's steps about the global endpoint, after Step 3."""

    def __init__(
        self,
        say: Narrator,
        gateway: SandboxedGateway,
        reporters: LoopbackReporters,
        kubectl: Callable[[str], str],
        timeout: float,
    ) -> None:
        self.say = say
        self.gateway = gateway
        self.reporters = reporters
        self.kubectl = kubectl  # runs a shown kubectl command, prints and returns its output
        self.timeout = timeout

    def show_split(self) -> bool:
        """Requests through the gateway split as the TrafficMap's weights say (2:1)."""
        self.say.step("Send requests to the global host through the gateway")
        weights = self._published({"worker-a": 2, "worker-b": 1})
        return self._measure(weights)

    def show_change(self) -> bool:
        """worker-a's reporter answers 1: the weights become 1:1, and so does the split."""
        self.say.step("Lower worker-a's count to 1 and watch the split follow")
        self.reporters["worker-a"].set_servable(1)
        self.say.say(
            "worker-a's reporter now answers servable 1: its ceiling drops to 1 after "
            "the next polls, the TrafficMap's weights become 1:1, the publisher rewrites the "
            f"HTTPRoute, and {self.gateway.title} "
            f"{'follow' if isinstance(self.gateway, ContourGateway) else 'follows'}."
        )
        weights = self._published({"worker-a": 1, "worker-b": 1})
        return self._measure(weights)

    def _published(self, weights: dict[str, int]) -> dict[str, int]:
        """Wait until the map, the route and the gateway all show `weights`."""
        want = [w for _, w in sorted(weights.items())]
        started = time.monotonic()
        while True:
            current = self._route_weights()
            if current == want and self._gateway_follows(weights):
                break
            if time.monotonic() - started > self.timeout:
                raise TrafficError(
                    f"the gateway did not serve {weights} within {self.timeout:.0f}s "
                    f"(the HTTPRoute's weights: {current}); the end of the logs:\n"
                    f"{self.gateway.log_tail()}"
                )
            time.sleep(0.5)
        self.kubectl(
            f"kubectl get trafficmap {spec.NAME} -n {spec.NAMESPACE} -o jsonpath='{MAP_WEIGHTS}'"
        )
        self.kubectl(
            f"kubectl get httproute {spec.NAME}-global -n {spec.NAMESPACE} "
            f"-o jsonpath='{ROUTE_BACKENDS}'"
        )
        self.say.detail("the backendRefs are sorted by cluster: worker-a's first, then worker-b's")
        return weights

    def _measure(self, weights: dict[str, int]) -> bool:
        self.say.say(
            f"{REQUESTS} requests, one after another, to http://127.0.0.1:{self.gateway.port}/ "
            f"with Host: {GLOBAL_HOST}; each home's model server answers `{SERVED_BY}<home>`:"
        )
        counts = send(self.gateway, REQUESTS)
        self.say.output(format_split(counts, weights, REQUESTS))
        if isinstance(self.gateway, ContourGateway):
            return self._judge_draws(counts, weights)
        ok = dict(counts) == expected_split(weights, REQUESTS)
        if ok:
            self.say.say(f"OK: {REQUESTS} requests split exactly as the weights say")
        else:
            self.say.error(f"DIFFERS: expected {expected_split(weights, REQUESTS)}")
        return ok

    def _judge_draws(self, counts: Counter[str], weights: dict[str, int]) -> bool:
        total = sum(weights.values())
        bounds = {
            c: acceptance(REQUESTS, w / total) if w else (0, 0) for c, w in sorted(weights.items())
        }
        ranges = ", ".join(f"{c} {lo}..{hi}" for c, (lo, hi) in bounds.items())
        self.say.detail(
            "Envoy draws a home for each request at random by weight, so the counts vary "
            f"from run to run: a split as weighted falls within {ranges} "
            f"(an exact binomial test; outside with probability under {FALSE_FAILURE:g})"
        )
        ok = split_is_plausible(counts, weights)
        if ok:
            self.say.say(f"OK: {REQUESTS} requests split as the weights say (binomial test)")
        else:
            self.say.error(f"DIFFERS: outside {ranges}")
        return ok

    def _route_weights(self) -> list[int]:
        result = self.gateway.plane.kubectl(
            "get",
            "httproute",
            f"{spec.NAME}-global",
            "-n",
            spec.NAMESPACE,
            "-o",
            "json",
            check=False,
        )
        return route_weights(json.loads(result.stdout)) if result.returncode == 0 else []

    def _gateway_follows(self, weights: dict[str, int]) -> bool:
        if isinstance(self.gateway, ContourGateway):
            # Envoy draws: read its route table (admin) rather than count a window.
            served = self.gateway.served_weights(GLOBAL_HOST) or {}
            return sorted(w for w in served.values() if w) == sorted(
                w for w in weights.values() if w
            )
        # Traefik applies a new route after its provider throttle (2s by default).
        probe = sum(weights.values()) * 10
        return dict(send(self.gateway, probe)) == expected_split(weights, probe)


class TrafficError(RuntimeError):
    """The gateway did not serve what the TrafficMap says in time."""


MAP_WEIGHTS = '{range .spec.entries[*]}{.cluster}{" weight="}{.weight}{"\\n"}{end}'
ROUTE_BACKENDS = (
    '{.spec.hostnames[0]}{"\\n"}{range .spec.rules[0].backendRefs[*]}'
    '{.name}{" weight="}{.weight}{"\\n"}{end}'
)
