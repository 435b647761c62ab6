"""Builders of raw Pod and InferenceService JSON for the reporter's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self


@dataclass
class PodBuilder:
    name: str
    service: str = "qwen3-0-6b"
    namespace: str = "qwen3-0-6b"
    component: str | None = "engine"
    ready: bool = True
    ip: str | None = "10.1.0.1"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    deleting: bool = False

    def not_ready(self) -> Self:
        self.ready = False
        return self

    def terminating(self) -> Self:
        self.deleting = True
        return self

    def decoder(self) -> Self:
        self.component = "decoder"
        return self

    def router(self) -> Self:
        self.component = "router"
        return self

    def with_labels(self, **labels: str) -> Self:
        self.labels.update(labels)
        return self

    def build(self) -> dict[str, Any]:
        labels = {"ome.io/inferenceservice": self.service, **self.labels}
        if self.component is not None:
            labels["component"] = self.component
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": f"uid-{self.name}",
            "labels": labels,
            "annotations": self.annotations,
        }
        if self.deleting:
            meta["deletionTimestamp"] = "2026-09-28T10:00:00Z"
        status: dict[str, Any] = {
            "conditions": [{"type": "Ready", "status": "True" if self.ready else "False"}]
        }
        if self.ip is not None:
            status["podIP"] = self.ip
        spec = {
            "containers": [
                {"name": "ome-container", "ports": [{"containerPort": p} for p in self.ports]}
            ]
        }
        return {"metadata": meta, "spec": spec, "status": status}


def a_pod(name: str, **kwargs: Any) -> PodBuilder:
    return PodBuilder(name, **kwargs)


def an_isvc(
    name: str = "qwen3-0-6b",
    namespace: str = "qwen3-0-6b",
    *,
    url: str | None = None,
    decoder: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"engine": {"minReplicas": 2}}
    if decoder:
        spec["decoder"] = {"minReplicas": 1}
    raw: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
    if url is not None:
        raw["status"] = {"url": url}
    return raw
