"""The demo on a real node (`ome-routing demo --node`, as root): both charts installed by helm.

Steps: a local control plane and one node (`devcluster.node.LocalNode`) with the controller
image of `make image` imported; `helm install` of `ome-resources` with the guide's values
(the CRDs and the controller, a pod of the image); the WorkloadClusters; each home's model
servers, pods with real readiness probes (worker-a: 3 ready, worker-b: 1 of 2); `helm
install` of `ome-capacity-reporter`, which counts them; the specification's InferenceService
placed on both homes with the reporter's URLs as endpoints; the wait for both ceilings; the
specification's Step 3 commands, compared with its outputs; then worker-b's copy of the
service deleted, so that its poll gets the reporter's 404, and the fallback commands
compared again.

Everything is stopped on the way out, on failure and on Ctrl-C too. Errors: `DemoError`,
and those of the local node.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ome_routing_dev.demo import spec
from ome_routing_dev.demo.commands import Commands, DemoError
from ome_routing_dev.demo.narration import Narrator
from ome_routing_dev.demo.nodescene import (
    engine_selector,
    model_server,
    poll_endpoint,
    ready_command,
)
from ome_routing_dev.demo.scene import (
    ADMITTED,
    HOMES,
    READY,
    placement_status,
    workload_clusters_manifest,
)
from ome_routing_dev.devcluster.image import build_image
from ome_routing_dev.devcluster.node import LocalNode

STEPS = 9
PODS = {"worker-a": 3, "worker-b": 2}  # model-server pods; HOMES says how many are ready
CONTROLLER = "helm install ome ./charts/ome-resources -n ome --create-namespace -f examples/values.yaml --wait --timeout 3m"
#: the controller's pods: the chart's selector for the release `ome`
_CONTROLLER_PODS = "app.kubernetes.io/name=ome-routing,app.kubernetes.io/instance=ome"
REPORTER = "helm install reporter ./charts/ome-capacity-reporter -n ome-reporter --create-namespace --wait --timeout 3m"
_POD_WAIT = 120.0


class NodeDemo(Commands):
    def __init__(self, repo: Path, narrator: Narrator, *, keep: bool = False) -> None:
        self.repo = repo
        self.say = narrator
        self.keep = keep
        self.matched = True
        self.plane = None
        self.controller = None
        self.node: LocalNode | None = None
        self.work = Path(tempfile.mkdtemp(prefix="ome-routing-demo-node-"))
        self._shown: dict[str, str] = {}

    def _steps(self, stack: contextlib.ExitStack) -> None:
        self._start_node(stack)
        self.say.step("Install the controller with helm (the CRDs, and the controller as a pod)")
        self._run(CONTROLLER)
        self._run("kubectl get pods -n ome -o wide")
        self.say.step("Register the workload clusters worker-a and worker-b")
        self._run(f"kubectl apply -f - <<'EOF'\n{workload_clusters_manifest(list(HOMES))}EOF")
        self._start_model_servers()
        reporter = self._install_reporter()
        self._create_service(reporter)
        self._wait_for_ceilings(
            "The controller pod polls the reporter through its Service every 10s and needs 3 "
            "readings (quorum: 3): the ceilings come from the third poll on.",
            120.0,
        )
        self.say.step("Run the commands of Step 3: Watch the capacity state")
        self._check(spec.CONDITION_AVAILABLE)
        self._check(spec.ENTRIES)
        self._show_fallback()
        self._summary()
        if self.keep:
            self._keep_until_interrupted(
                "kubectl get pods -A -o wide",
                f"kubectl logs -n ome -l {_CONTROLLER_PODS}",
            )

    # -- steps -------------------------------------------------------------------------------

    def _start_node(self, stack: contextlib.ExitStack) -> None:
        self.say.step("Start a local control plane and one real node, with the controller image")
        started = time.monotonic()
        image = build_image(self.repo, progress=self.say.detail)
        node = LocalNode(self.work / "cluster", images=[image.archive], install_crds=False)
        stack.callback(node.stop)
        stack.callback(self.say.detail, "stopped the node and the control plane")
        node.start()
        self.node, self.plane = node, node.plane
        self.say.say(
            f"kube-apiserver {node.plane.version} at {node.plane.server_url}; node local-node "
            f"Ready (kubelet, containerd, kube-proxy), image ome-routing:0.1.0 imported "
            f"({time.monotonic() - started:.1f}s)"
        )

    def _start_model_servers(self) -> None:
        self.say.step("Run each home's model servers (pods with readiness probes)")
        for home, count in PODS.items():
            self._run(f"kubectl apply -f - <<'EOF'\n{model_server(home, spec.NAME, count)}EOF")
        command = " ".join(shlex.quote(a) for a in ready_command())
        for home, ready in HOMES.items():
            names = self._running_pods(home)
            self.say.say(f"{home}: {ready} of its {len(names)} model servers made ready")
            for name in names[:ready]:
                self._run(f"kubectl exec {name} -n {home} -- {command}")
            marked = " ".join(f"pod/{name}" for name in names[:ready])
            self._run(f"kubectl wait -n {home} --for=condition=Ready --timeout=60s {marked}")
            self._run(f"kubectl get pods -n {home} -l {engine_selector(spec.NAME)}")

    def _install_reporter(self) -> str:
        assert self.plane is not None
        self.say.step("Install the capacity reporter with helm (one for every home's services)")
        self._run(REPORTER)
        services = json.loads(
            self.plane.kubectl("get", "services", "-n", "ome-reporter", "-o", "json").stdout
        )["items"]
        if len(services) != 1:
            raise DemoError(f"the reporter chart made {len(services)} Services, expected 1")
        ip, port = services[0]["spec"]["clusterIP"], services[0]["spec"]["ports"][0]["port"]
        url = f"http://{ip}:{port}"
        self.say.detail(
            f"the reporter's Service is {url}; each home's poll URL is {url}/<home>/{spec.NAME}/capacity"
        )
        return url

    def _create_service(self, reporter: str) -> None:
        self.say.step("Create the InferenceService of Step 2, placed on both homes")
        self._run(f"kubectl create namespace {spec.NAMESPACE}")
        self._run("kubectl apply -f examples/isvc.yaml")
        self.say.say(
            f"Write the placement status as OME's placement controller would: both homes "
            f"Admitted with {ADMITTED} replicas, {READY} ready, and the reporter's URLs as "
            f"endpoints"
        )
        endpoints = {home: poll_endpoint(reporter, home, spec.NAME) for home in HOMES}
        patch = json.dumps(placement_status(endpoints), separators=(",", ":"))
        self._run(
            f"kubectl patch inferenceservice {spec.NAME} -n {spec.NAMESPACE} "
            f"--subresource=status --type=merge -p {shlex.quote(patch)}"
        )
        self._check(spec.PLACEMENT_PHASE)

    def _show_fallback(self) -> None:
        self.say.step("Make one home fall back to its admitted replicas")
        self._run(f"kubectl delete inferenceservice {spec.NAME} -n worker-b")
        self.say.say(
            "worker-b's reporter no longer knows the service and answers its poll with 404."
        )
        self._check_fallback(60.0)

    # -- helpers -----------------------------------------------------------------------------

    def _running_pods(self, home: str) -> list[str]:
        assert self.plane is not None
        deadline = time.monotonic() + _POD_WAIT
        while True:
            listed = json.loads(
                self.plane.kubectl(
                    "get", "pods", "-n", home, "-l", engine_selector(spec.NAME), "-o", "json"
                ).stdout
            )["items"]
            if listed and all(_running(p) for p in listed):
                return sorted(p["metadata"]["name"] for p in listed)
            if time.monotonic() > deadline:
                raise DemoError(f"the model servers of {home} did not run within {_POD_WAIT:.0f}s")
            time.sleep(0.5)

    def _log(self) -> str:
        """The controller pod's log, as a failed wait quotes it."""
        assert self.plane is not None
        logs = self.plane.kubectl(
            "logs", "-n", "ome", "-l", _CONTROLLER_PODS, "--tail=30",
            check=False,
        )  # fmt: skip
        return f"the controller's log:\n{logs.stdout or logs.stderr}"


def _running(pod: Mapping[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)


def run_node_demo(repo: Path, *, keep: bool = False, narrator: Narrator | None = None) -> bool:
    """Run the demo on a real node; True when every output matched the specification."""
    return NodeDemo(repo, narrator or Narrator(steps=STEPS), keep=keep).run()
