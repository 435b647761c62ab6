"""The Kubernetes-backed reporter's cost per poll answer, at a cluster's scale.

A poll is answered from the reporter's caches: with nothing changed since the last answer,
it only re-stamps the service's count; after an event of one of its pods, the first answer
counts that service's pods again; after a health round, each service's first answer counts
its pods again. This times the three, for a cluster of
`--services` InferenceServices with `--pods` pods each (a fifth of them not Ready), and
prints the best of `--rounds` rounds in microseconds per answer.

    .venv/bin/python bench/reporter_counting/run.py --services 1000 --pods 10

Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

from lightkube import AsyncClient

from ome_routing.reporter.kubernetes import KubernetesReporter
from ome_routing.reporter.view import isvc_fields, pod_fields


def a_pod(namespace: str, service: str, i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-engine-{i}",
            "namespace": namespace,
            "uid": f"{namespace}-{service}-{i}",
            "resourceVersion": "1",
            "labels": {"ome.io/inferenceservice": service, "component": "engine"},
        },
        "spec": {"containers": [{"name": "ome-container", "ports": [{"containerPort": 8080}]}]},
        "status": {
            "podIP": f"10.{i % 250}.0.1",
            "conditions": [{"type": "Ready", "status": "True" if i % 5 else "False"}],
        },
    }


def cluster(services: int, pods: int) -> KubernetesReporter:
    reporter = KubernetesReporter(cast(AsyncClient, object()))
    view = reporter.view
    for s in range(services):
        namespace, name = f"ns-{s % 50}", f"svc-{s}"
        isvc = {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}}
        key = (namespace, name)
        view.isvcs.cache[key] = isvc_fields(isvc)
        reporter._isvc_changed(key, None, view.isvcs.cache[key])
        for i in range(pods):
            pod = pod_fields(a_pod(namespace, name, i))
            key = (namespace, pod["metadata"]["name"])
            view.pods.cache[key] = pod
            reporter._pod_changed(key, None, pod)
    for informer in (view.pods, view.isvcs):
        informer.synced.set()
        informer.live = True
    return reporter


def best(rounds: int, answers: int, once: Any) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(answers):
            once()
        times.append((time.perf_counter() - start) / answers)
    return min(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    reporter = cluster(args.services, args.pods)
    host, path = "llm.example.com", "/ns-0/svc-0/capacity"
    assert reporter.answer(host, path).status == 200

    def unchanged() -> None:
        reporter.answer(host, path)

    pod_key = ("ns-0", "svc-0-engine-1")
    pod = reporter.view.pods.cache[pod_key]

    def after_a_pod_event() -> None:
        reporter._pod_changed(pod_key, pod, pod)
        reporter.answer(host, path)

    def after_a_health_round() -> None:
        reporter._health_changed()
        for s in range(args.services):
            reporter.answer(host, f"/ns-{s % 50}/svc-{s}/capacity")

    print(f"{args.services} services x {args.pods} pods")
    print(f"  answer, nothing changed:   {best(args.rounds, 2000, unchanged):10.1f} us")
    print(f"  answer after a pod event:  {best(args.rounds, 2000, after_a_pod_event):10.1f} us")
    round_ = best(args.rounds, 3, after_a_health_round) / args.services
    print(f"  answer after a health round, every service polled once: {round_:10.1f} us each")


if __name__ == "__main__":
    main()
