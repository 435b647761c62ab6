"""The demo: capacity polling end to end, on a local control plane, checked against the spec.

Steps: a local control plane with the CRDs; the WorkloadClusters `worker-a` and `worker-b`;
a reference reporter for each on loopback (3 and 1); the specification's InferenceService
with the placement status OME's placement controller would write; the routing controller;
the wait for both ceilings; the specification's Step 3 commands, compared with its outputs;
one home falling back (its poll gets the model server's 404), compared again; the fallback
gauge from `/metrics`; then health probes (`demo.probes`): a home gated and let back in.

Everything started here is stopped on the way out, on failure and on Ctrl-C too: the
controller, then the reporters, then the control plane. With `keep`, the demo first waits
for Ctrl-C, so that a reader can explore with kubectl.

Errors: `DemoError` (a step failed; the message says which, with the relevant log). Errors
of the local control plane (`ControlPlaneError`, `ToolsError`, `PkiError`) pass through.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ome_routing_dev.demo import probes, spec
from ome_routing_dev.demo.commands import Commands, DemoError
from ome_routing_dev.demo.controller import ControllerError, ControllerProcess
from ome_routing_dev.demo.kubereporters import KubernetesReporters
from ome_routing_dev.demo.narration import Narrator
from ome_routing_dev.demo.reporters import LoopbackReporters
from ome_routing_dev.demo.scene import (
    ADMITTED,
    HOMES,
    READY,
    placement_status,
    workload_clusters_manifest,
)
from ome_routing_dev.demo.traffic import (
    TrafficError,
    TrafficSteps,
    describe_gateway,
    home_addresses,
    home_host,
    write_values,
)
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools
from ome_routing_dev.devcluster.gateway_base import GatewayError, SandboxedGateway
from ome_routing_dev.devcluster.gateways import gateway_type
from ome_routing_dev.devcluster.processes import free_ports

ISVC_FILE = "examples/isvc.yaml"
VALUES_FILE = "examples/values.yaml"
STEPS = 9 + probes.STEPS
TRAFFIC_STEPS = 3  # the gateway, the split, the split after a change


@dataclass(frozen=True)
class DemoOptions:
    repo: Path  # a directory with examples/isvc.yaml and examples/values.yaml; commands run here
    keep: bool = False
    ceiling_timeout: float = 90.0  # quorum 3 at period 10s gives ceilings after about 20s
    fallback_timeout: float = 45.0  # the next poll (period 10s) fails, then one map write
    kubernetes_reporter: bool = False  # count from Pod objects (demo.kubereporters)
    traffic: bool = False  # publish to a local gateway and send requests through it
    gateway: str = "traefik"  # which gateway (devcluster.gateways): traefik or contour
    traffic_timeout: float = 90.0  # a new ceiling needs quorum 2 at period 10s, then the route


def find_repo(candidates: list[Path]) -> Path:
    """The first directory that holds the demo's example files."""
    for candidate in candidates:
        if (candidate / ISVC_FILE).is_file() and (candidate / VALUES_FILE).is_file():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise DemoError(
        f"{ISVC_FILE} and {VALUES_FILE} not found (looked in {tried}); "
        "run the demo from a clone of the repository"
    )


class Demo(Commands):
    def __init__(self, options: DemoOptions, narrator: Narrator) -> None:
        self.options = options
        self.repo = options.repo
        self.say = narrator
        self.matched = True
        self.work = Path(tempfile.mkdtemp(prefix="ome-routing-demo-"))
        self.plane: LocalControlPlane | None = None
        self.reporters: LoopbackReporters | None = None
        self.controller: ControllerProcess | None = None
        self.gateway: SandboxedGateway | None = None
        self.backend_port = free_ports(1)[0] if options.traffic else 0
        self._shown: dict[str, str] = {}  # each home's state as last narrated

    # -- running ------------------------------------------------------------------------------

    def _steps(self, stack: contextlib.ExitStack) -> None:
        stack.callback(self._cleaned_up)
        self._start_control_plane(stack)
        self._register_clusters()
        self._start_reporters(stack)
        if self.options.traffic:
            self._start_gateway(stack)
        self._create_service()
        self._start_controller(stack)
        self._wait_for_ceilings(
            "The service polls every 10s and needs 3 readings in a row (quorum: 3), "
            "so each home gets its ceiling from the third poll on, about 20 seconds in.",
            self.options.ceiling_timeout,
        )
        self._check_capacity_state()
        if self.options.traffic:
            self._show_traffic()
        self._show_fallback()
        self._show_gauge()
        assert self.reporters is not None
        probes.run_probe_steps(self, self.reporters)
        self._summary()
        if self.options.keep:
            assert self.controller is not None
            self._keep_until_interrupted(
                f"kubectl get trafficmap {spec.NAME} -n {spec.NAMESPACE} -o yaml",
                f"curl -s {self.controller.metrics_url}",
                f"tail -f {shlex.quote(str(self.controller.log))}",
            )

    # -- steps -----------------------------------------------------------------------------------

    def _start_control_plane(self, stack: contextlib.ExitStack) -> None:
        self.say.step("Start a local control plane (etcd and kube-apiserver on 127.0.0.1)")
        started = time.monotonic()
        tools = ensure_tools(progress=self.say.detail)
        plane = LocalControlPlane(
            self.work / "control-plane", tools, gateway_api=self.options.traffic
        )
        stack.callback(plane.stop)
        plane.start()
        self.plane = plane
        self.say.say(
            f"kube-apiserver {plane.version} at {plane.server_url}, with the CRDs "
            f"InferenceService, WorkloadCluster and TrafficMap "
            f"{'and the Gateway API standard channel ' if self.options.traffic else ''}"
            f"({time.monotonic() - started:.1f}s)"
        )

    def _register_clusters(self) -> None:
        self.say.step("Register the workload clusters worker-a and worker-b")
        self._run(f"kubectl apply -f - <<'EOF'\n{workload_clusters_manifest(list(HOMES))}EOF")

    def _start_reporters(self, stack: contextlib.ExitStack) -> None:
        if self.options.kubernetes_reporter:
            self._start_kubernetes_reporter(stack)
            return
        self.say.step("Start a capacity reporter for each home, on loopback")
        homes = None
        if self.options.traffic:
            addresses = home_addresses(list(HOMES))
            homes = {c: (a, self.backend_port, home_host(c)) for c, a in addresses.items()}
        reporters = LoopbackReporters(HOMES, homes)
        stack.callback(reporters.close)
        reporters.start()
        self.reporters = reporters
        for reporter in reporters:
            self.say.say(
                f"{reporter.name}: {reporter.poll_url} answers "
                f'{{"servable": {reporter.servable}, "observedAt": "<now>"}}'
            )
        self.say.detail("each URL stands in for the route to the reporter on that workload cluster")

    def _start_kubernetes_reporter(self, stack: contextlib.ExitStack) -> None:
        assert self.plane is not None
        self.say.step("Start one Kubernetes-backed capacity reporter for both homes")
        reporters = KubernetesReporters(self.plane, spec.NAME, HOMES)
        stack.callback(reporters.close)
        reporters.start()
        self.reporters = reporters  # type: ignore[assignment]
        for home in reporters:
            self.say.say(
                f"{home.name}: {home.poll_url} counts the Ready pods of "
                f"{home.name}/{home.service}: {home.servable}"
            )
        self.say.detail("the pods are Pod objects on the local control plane, with Ready set")

    def _create_service(self) -> None:
        assert self.reporters is not None
        self.say.step("Create the InferenceService of Step 2, placed on both homes")
        self._run(f"kubectl create namespace {spec.NAMESPACE}")
        self._run(f"kubectl apply -f {ISVC_FILE}")
        self.say.say(
            f"Write the placement status as OME's placement controller would: both homes "
            f"Admitted with {ADMITTED} replicas, {READY} ready, and the reporters' URLs as "
            f"endpoints"
        )
        patch = json.dumps(
            placement_status({r.name: r.endpoint for r in self.reporters}), separators=(",", ":")
        )
        self._run(
            f"kubectl patch inferenceservice {spec.NAME} -n {spec.NAMESPACE} "
            f"--subresource=status --type=merge -p {shlex.quote(patch)}"
        )
        self._check(spec.PLACEMENT_PHASE)

    def _start_controller(self, stack: contextlib.ExitStack) -> None:
        assert self.plane is not None
        self.say.step("Start the routing controller with the chart values of Step 1")
        port, probe_port = free_ports(2)
        args = [
            "--config",
            self._values_file(),
            "--kubeconfig",
            str(self.plane.kubeconfig),
            "--namespace",
            "ome",
            "--metrics-bind-address",
            f"127.0.0.1:{port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{probe_port}",
            "--no-leader-elect",
        ]
        self.say.command(shlex.join(["ome-routing", "controller", *args]))
        controller = ControllerProcess(
            args, self.work / "controller.log", port, self.options.repo, probe_port=probe_port
        )
        if self.gateway is not None:
            # Its polls resolve the homes' hostnames as Traefik does: in the private namespace.
            controller.argv = self.gateway.sandbox.wrap(controller.argv)
        stack.callback(controller.stop)
        try:
            controller.start()
        except ControllerError as err:
            raise DemoError(str(err)) from None
        self.controller = controller
        self.say.detail(f"pid {controller.pid}, log in {controller.log}")
        self.say.detail(f"metrics at {controller.metrics_url}")

    def _start_gateway(self, stack: contextlib.ExitStack) -> None:
        assert self.plane is not None and self.reporters is not None
        kind = gateway_type(self.options.gateway)
        self.say.step(f"Start the global gateway ({kind.title}, Gateway API) on 127.0.0.1")
        gateway = kind(
            self.plane, {r.host: r.address for r in self.reporters}, dir=self.work / "gateway"
        )
        stack.callback(gateway.stop)
        try:
            gateway.start()
        except GatewayError as err:
            raise DemoError(str(err)) from None
        self.gateway = gateway
        describe_gateway(self.say, gateway)

    def _values_file(self) -> str:
        """Step 1's chart values; with the gateway, plus the publisher's `endpoint` block."""
        if self.gateway is None:
            return VALUES_FILE
        path = self.work / "values.yaml"
        write_values(
            self.say, self.options.repo / VALUES_FILE, path, self.gateway, self.backend_port
        )
        return str(path)

    def _show_traffic(self) -> None:
        assert self.gateway is not None and self.reporters is not None
        steps = TrafficSteps(
            self.say, self.gateway, self.reporters, self._run, self.options.traffic_timeout
        )
        try:
            self.matched &= steps.show_split()
            self.matched &= steps.show_change()
        except TrafficError as err:
            raise DemoError(str(err)) from None

    def _check_capacity_state(self) -> None:
        self.say.step("Run the commands of Step 3: Watch the capacity state")
        self._check(spec.CONDITION_AVAILABLE)
        self._check(spec.ENTRIES)
        self.say.detail(
            "worker-b's ceiling of 1 lowers its allocated replicas from 2 to 1 (source Endpoint); "
            "worker-a's ceiling of 3 is above its 2 admitted replicas (source ControlPlane)"
        )

    def _show_fallback(self) -> None:
        assert self.reporters is not None
        self.say.step("Make one home fall back to its admitted replicas")
        self.reporters["worker-b"].route_to_model_server()
        self.say.say(
            "worker-b's poll now reaches the model server, which answers 404, as when the "
            "route to the reporter is missing."
        )
        self._check_fallback(self.options.fallback_timeout)

    def _show_gauge(self) -> None:
        assert self.controller is not None
        self.say.step(f"Read the gauge {spec.FALLBACK_GAUGE} from the controller's /metrics")
        self.say.command(f"curl -s {self.controller.metrics_url} | grep '^{spec.FALLBACK_GAUGE}{{'")
        deadline = time.monotonic() + 15
        lines: list[str] = []
        while time.monotonic() < deadline:
            lines = spec.gauge_lines(self.controller.metrics())
            if any(line.endswith(" 1.0") for line in lines):
                break
            time.sleep(0.5)
        self.say.output("\n".join(lines))
        expected = (
            f'{spec.FALLBACK_GAUGE}{{namespace="{spec.NAMESPACE}",trafficmap="{spec.NAME}"}} 1.0'
        )
        ok = lines == [expected]
        self.matched &= ok
        if ok:
            self.say.say("OK: one home without a ceiling")
        else:
            self.say.error(f"DIFFERS: expected {expected}")

    def _cleaned_up(self) -> None:
        # Runs last on the way out: the ExitStack has already stopped everything after it.
        self.say.detail("stopped the controller, the reporters and the control plane")


def run_demo(options: DemoOptions, narrator: Narrator | None = None) -> bool:
    """Run the demo; True when every output matched the specification."""
    steps = STEPS + (TRAFFIC_STEPS if options.traffic else 0)
    return Demo(options, narrator or Narrator(steps=steps)).run()
