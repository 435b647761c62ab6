"""Both charts installed with helm on the node, the controller and the reporter as pods of
the image `make image` builds: probes, the restricted security context as the runtime
enforces it, leader election across pods, upgrades, uninstall, and capacity from pods that
a kubelet made Ready."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pods import get, ready_pods, wait_for
from scene import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_RELEASE,
    FAST_POLL,
    REPO,
    REPORTER_NAMESPACE,
    capacity,
    engine_pods,
    helm,
    mark_ready,
    model_server,
    place,
    routing_values,
    running,
    serve_ready,
)

from ome_routing_dev.demo import spec
from ome_routing_dev.devcluster import LocalControlPlane

SELECTOR = f"app.kubernetes.io/name=ome-routing,app.kubernetes.io/instance={CONTROLLER_RELEASE}"
LEASE = "ome-routing-controller"

Install = Callable[..., None]


def controller_pods(plane: LocalControlPlane) -> list[str]:
    return ready_pods(plane, CONTROLLER_NAMESPACE, SELECTOR)


def lease_holder(plane: LocalControlPlane) -> str:
    found = plane.kubectl(
        "get", "lease", LEASE, "-n", CONTROLLER_NAMESPACE, "-o", "json", check=False
    )
    if found.returncode != 0:
        return ""
    return str(yaml.safe_load(found.stdout)["spec"].get("holderIdentity") or "")


SECURITY_PROBE = (
    "import os\n"
    "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
    "try:\n"
    "    open('/written', 'w')\n"
    "    root = 'writable'\n"
    "except OSError as error:\n"
    "    root = os.strerror(error.errno)\n"
    "print(os.getuid(), os.getgid(), status['CapEff'].strip(), status['NoNewPrivs'].strip(), root)\n"
)


def test_the_controller_pod_becomes_ready_through_its_probes_under_the_restricted_context(
    plane: LocalControlPlane, install: Install
) -> None:
    install()  # the chart's default values
    (pod_name,) = wait_for("one Ready controller pod", lambda: controller_pods(plane))
    pod = get(plane, "pod", pod_name, "-n", CONTROLLER_NAMESPACE)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "ome-routing:0.1.0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    # What the runtime enforces, seen from inside the container.
    probe = plane.kubectl(
        "exec", pod_name, "-n", CONTROLLER_NAMESPACE, "--", "python3.11", "-c", SECURITY_PROBE
    )
    assert probe.stdout.split(maxsplit=4) == [
        "65532", "65532", "0000000000000000", "1", "Read-only file system\n",
    ]  # fmt: skip
    # In-cluster configuration: the controller reads its ConfigMap through the API.
    logs = plane.kubectl("logs", pod_name, "-n", CONTROLLER_NAMESPACE).stdout
    assert "multi-cluster routing is off" in logs


def test_of_two_replicas_one_leads_and_deleting_the_leader_hands_over(
    plane: LocalControlPlane, install: Install
) -> None:
    install(routing_values(FAST_POLL, replicas=2))
    pods = wait_for("2 Ready controller pods", lambda: len(p := controller_pods(plane)) == 2 and p)
    # (The Lease may still name a pod of an earlier release until one of these takes it.)
    leader = wait_for(
        "one of the pods holding the Lease",
        lambda: next((p for p in pods if lease_holder(plane).startswith(f"{p}_")), None),
    )
    plane.kubectl("delete", "pod", leader, "-n", CONTROLLER_NAMESPACE, "--wait=false")
    new = wait_for(
        "another holder",
        lambda: (h := lease_holder(plane)) and not h.startswith(f"{leader}_") and h,
    )
    pods_now = get(plane, "pods", "-n", CONTROLLER_NAMESPACE, "-l", SELECTOR)["items"]
    assert any(new.startswith(f"{p['metadata']['name']}_") for p in pods_now), (new, pods_now)


def test_the_ceiling_follows_the_reporter_as_pods_scale_fail_readiness_and_are_deleted(
    plane: LocalControlPlane, install: Install, reporter: str
) -> None:
    home, service, namespace = "worker-a", "scaled", "routed"
    plane.kubectl("apply", "-f", "-", input=model_server(home, service, 3))
    names = serve_ready(plane, home, service, 3)
    install(routing_values(FAST_POLL))
    place(plane, namespace, service, {home: f"{reporter}/{home}/{service}/"})

    def reported(count: int) -> Any:
        return wait_for(
            f"a ceiling of {count}",
            lambda: capacity(plane, namespace, service).get(home, {}).get("reported") == count,
        )

    reported(3)
    mark_ready(plane, home, names[0], ready=False)  # fails its readiness probe
    reported(2)
    plane.kubectl("delete", "pod", names[1], "-n", home, "--wait=false")  # its replacement
    reported(1)  # starts not ready
    plane.kubectl("scale", f"deployment/{service}-engine", "-n", home, "--replicas=4")
    wait_for(
        "4 running pods",
        lambda: len(p := engine_pods(plane, home, service)) == 4 and all(map(running, p)),
    )
    for pod in engine_pods(plane, home, service):
        mark_ready(plane, home, pod["metadata"]["name"])
    reported(4)


def test_helm_upgrade_with_a_new_poll_takes_effect(
    plane: LocalControlPlane, install: Install, reporter: str
) -> None:
    home, service, namespace = "worker-a", "upgraded", "upgraded"
    plane.kubectl("apply", "-f", "-", input=model_server(home, service, 2))
    serve_ready(plane, home, service, 2)
    install(routing_values({**FAST_POLL, "path": "/no-such-path"}))
    place(plane, namespace, service, {home: f"{reporter}/{home}/{service}/"})
    wait_for(
        "the fallback of a poll answered 404",
        lambda: (
            capacity(plane, namespace, service).get(home, {}).get("fallbackReason")
            == "capacity endpoint returned HTTP 404"
        ),
    )
    before = set(controller_pods(plane))
    install(routing_values(FAST_POLL), verb="upgrade")
    wait_for(
        "the new poll's ceiling",
        lambda: capacity(plane, namespace, service).get(home, {}).get("reported") == 2,
    )
    assert not before & set(controller_pods(plane)), "the upgrade did not roll the pods"


def test_helm_uninstall_leaves_no_trafficmap_writer(
    plane: LocalControlPlane, install: Install, reporter: str
) -> None:
    home, service, namespace = "worker-a", "uninstalled", "uninstalled"
    plane.kubectl("apply", "-f", "-", input=model_server(home, service, 1))
    serve_ready(plane, home, service, 1)
    install(routing_values(FAST_POLL))
    place(plane, namespace, service, {home: f"{reporter}/{home}/{service}/"})
    wait_for(
        "a ceiling", lambda: capacity(plane, namespace, service).get(home, {}).get("reported") == 1
    )
    helm(plane, "uninstall", CONTROLLER_RELEASE, "-n", CONTROLLER_NAMESPACE, "--wait")
    wait_for(
        "no controller pod",
        lambda: not get(plane, "pods", "-n", CONTROLLER_NAMESPACE, "-l", SELECTOR)["items"],
    )
    version = get(plane, "trafficmap", service, "-n", namespace)["metadata"]["resourceVersion"]
    served = reports_served(plane, home, service)
    plane.kubectl("scale", f"deployment/{service}-engine", "-n", home, "--replicas=0")
    wait_for("the model server gone", lambda: not engine_pods(plane, home, service))
    # First the change a writer would follow, there to be read: the reporter answers 0 for
    # the service, here three times over after the first 0. A writer left behind polls
    # the reporter (period 1s) and so shows in the reporter's count of reports served.
    asked = [0]
    wait_for("the reporter to answer 0", lambda: ask_reporter(plane, home, service, asked) == 0)
    for _ in range(3):
        assert ask_reporter(plane, home, service, asked) == 0
    assert reports_served(plane, home, service) == served + asked[0], "someone else polled it"
    assert (
        get(plane, "trafficmap", service, "-n", namespace)["metadata"]["resourceVersion"] == version
    )
    accounts = get(plane, "serviceaccounts", "-n", CONTROLLER_NAMESPACE)["items"]
    assert [a["metadata"]["name"] for a in accounts] == ["default"]
    install(routing_values(FAST_POLL))  # for the fixture's uninstall


#: Run in the reporter's container: GET a path of the reporter itself; prints the status
#: and the body.
REPORTER_GET = (
    "import sys, urllib.error, urllib.request\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
    "try:\n"
    "    answer = opener.open('http://127.0.0.1:8080' + sys.argv[1], timeout=10)\n"
    "    print(answer.status, answer.read().decode())\n"
    "except urllib.error.HTTPError as error:\n"
    "    print(error.code, error.read().decode())\n"
)


def reporter_pods(plane: LocalControlPlane) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in get(plane, "pods", "-n", REPORTER_NAMESPACE)["items"]
    )


def reporter_get(plane: LocalControlPlane, pod: str, path: str) -> tuple[int, str]:
    shown = plane.kubectl(
        "exec", pod, "-n", REPORTER_NAMESPACE, "--", "python3.11", "-c", REPORTER_GET, path
    )
    status, _, body = shown.stdout.partition(" ")
    return int(status), body


def ask_reporter(plane: LocalControlPlane, home: str, service: str, asked: list[int]) -> int:
    """The servable count the reporter answers for the service's copy on `home` (-1 for
    no count), counting each answered report in `asked[0]`."""
    status, body = reporter_get(plane, reporter_pods(plane)[0], f"/{home}/{service}/capacity")
    if status != 200:
        return -1
    asked[0] += 1
    return int(json.loads(body)["servable"])


def reports_served(plane: LocalControlPlane, home: str, service: str) -> float:
    """`ome_routing_reporter_reports_total` of the service's copy on `home`, over the
    reporter's pods."""
    labels = {f'namespace="{home}"', f'inferenceservice="{service}"'}
    total = 0.0
    for pod in reporter_pods(plane):
        _, text = reporter_get(plane, pod, "/metrics")
        for line in text.splitlines():
            series, _, value = line.rpartition(" ")
            name, _, shown = series.rstrip("}").partition("{")
            if name == "ome_routing_reporter_reports_total" and set(shown.split(",")) == labels:
                total += float(value)
    return total


def test_the_guides_step_3_commands_give_the_guides_outputs(
    plane: LocalControlPlane, install: Install, reporter: str, tmp_path: Path
) -> None:
    counts = {"worker-a": 3, "worker-b": 1}
    for home, ready in counts.items():
        plane.kubectl("apply", "-f", "-", input=model_server(home, spec.NAME, ready + 1))
        serve_ready(plane, home, spec.NAME, ready)
    install(routing_values())  # the guide's values, as they are
    endpoints = {home: f"{reporter}/{home}/{spec.NAME}/" for home in counts}
    plane.kubectl("create", "namespace", spec.NAMESPACE, check=False)
    plane.kubectl("apply", "-f", str(REPO / "examples" / "isvc.yaml"))
    place_status_only(plane, endpoints)

    def run(command: spec.SpecCommand) -> str:
        result = subprocess.run(
            ["sh", "-c", command.command], env=plane.env(), capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        return result.stdout

    assert run(spec.PLACEMENT_PHASE) == spec.PLACEMENT_PHASE.expected
    # The guide's poll: 4 samples, quorum 3, every 10s: the ceilings show after 3 polls.
    wait_for("the guide's entries", lambda: spec.ENTRIES.matches(run(spec.ENTRIES)), timeout=120)
    assert spec.CONDITION_AVAILABLE.matches(run(spec.CONDITION_AVAILABLE))


def place_status_only(plane: LocalControlPlane, endpoints: dict[str, str]) -> None:
    from ome_routing_dev.demo.scene import placement_status, workload_clusters_manifest

    plane.kubectl("apply", "-f", "-", input=workload_clusters_manifest(list(endpoints)))
    plane.kubectl(
        "patch", "inferenceservice", spec.NAME, "-n", spec.NAMESPACE, "--subresource=status",
        "--type=merge", "-p", json.dumps(placement_status(endpoints)),
    )  # fmt: skip
