"""The `ome-capacity-reporter` chart, rendered and linted by the real helm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import ROOT, find, run_helm

REPORTER_CHART = ROOT / "charts" / "ome-capacity-reporter"

ROUTED = {
    "route": {
        "enabled": True,
        "gateway": {"name": "ome-gateway", "namespace": "envoy-gateway-system"},
        "sharedHost": "llm.worker-a.example.com",
        "domain": "worker-a.example.com",
        "services": [{"namespace": "qwen3-0-6b", "name": "qwen3-0-6b"}],
    }
}


def render(helm: Path, tmp_path: Path, *values: dict[str, Any]) -> list[dict[str, Any]]:
    args: list[str] = []
    for i, value in enumerate(values):
        path = tmp_path / f"values-{i}.yaml"
        path.write_text(yaml.safe_dump(value))
        args += ["-f", str(path)]
    result = run_helm(
        helm, "template", "caps", str(REPORTER_CHART), "--namespace", "reporter", *args
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def refused(helm: Path, tmp_path: Path, value: dict[str, Any]) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(value))
    result = run_helm(helm, "template", "caps", str(REPORTER_CHART), "-f", str(path))
    assert result.returncode != 0
    return result.stderr


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return dict(only)


def test_the_chart_lints(helm: Path) -> None:
    result = run_helm(helm, "lint", str(REPORTER_CHART), "--strict")
    assert result.returncode == 0, result.stdout + result.stderr


class TestDeployment:
    def test_it_runs_the_kubernetes_reporter_from_the_controller_image(
        self, helm: Path, tmp_path: Path
    ) -> None:
        reporter = container(render(helm, tmp_path))
        assert reporter["image"] == "ome-routing:0.1.0"
        assert reporter["command"] == ["ome-routing", "reporter"]
        assert reporter["args"] == [
            "--kubernetes",
            "--host=0.0.0.0",
            "--port=8080",
            "--path=/capacity",
            "--watch-idle-timeout=30s",
        ]

    def test_it_runs_as_non_root_with_a_read_only_root_filesystem(
        self, helm: Path, tmp_path: Path
    ) -> None:
        docs = render(helm, tmp_path)
        pod = find(docs, "Deployment")["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        security = container(docs)["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]

    def test_health_values_become_the_reporters_flags(self, helm: Path, tmp_path: Path) -> None:
        health = {"health": {"path": "/health", "timeout": "500ms", "period": "2s"}}
        args = container(render(helm, tmp_path, health))["args"]
        assert args[5:] == [
            "--health-path=/health",
            "--health-timeout=500ms",
            "--health-period=2s",
            "--health-port=8080",
            "--health-concurrency=16",
        ]

    def test_the_service_sends_its_port_to_the_reporter(self, helm: Path, tmp_path: Path) -> None:
        service = find(render(helm, tmp_path), "Service")
        assert service["spec"]["ports"] == [
            {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
        ]


def test_the_cluster_role_reads_pods_and_inferenceservices_only(helm: Path, tmp_path: Path) -> None:
    role = find(render(helm, tmp_path), "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["ome.io"],
            "resources": ["inferenceservices"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    binding = find(render(helm, tmp_path), "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "caps-ome-capacity-reporter", "namespace": "reporter"}
    ]


class TestPollRoutes:
    def test_no_route_unless_enabled(self, helm: Path, tmp_path: Path) -> None:
        assert not [d for d in render(helm, tmp_path) if d["kind"] == "HTTPRoute"]

    def test_shared_host_routes_the_exact_poll_path_to_the_reporter(
        self, helm: Path, tmp_path: Path
    ) -> None:
        route = find(render(helm, tmp_path, ROUTED), "HTTPRoute")
        assert route["metadata"]["namespace"] == "reporter"
        assert route["spec"]["parentRefs"] == [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": "ome-gateway",
                "namespace": "envoy-gateway-system",
            }
        ]
        assert route["spec"]["hostnames"] == ["llm.worker-a.example.com"]
        (rule,) = route["spec"]["rules"]
        assert rule["matches"] == [
            {"path": {"type": "Exact", "value": "/qwen3-0-6b/qwen3-0-6b/capacity"}}
        ]
        assert rule["backendRefs"] == [{"name": "caps-ome-capacity-reporter", "port": 8080}]

    def test_per_service_subdomains_route_the_poll_path_on_the_services_host(
        self, helm: Path, tmp_path: Path
    ) -> None:
        scheme = {"route": {"hostScheme": "perServiceSubdomain"}}
        route = find(render(helm, tmp_path, ROUTED, scheme), "HTTPRoute")
        assert route["spec"]["hostnames"] == ["qwen3-0-6b.qwen3-0-6b.worker-a.example.com"]
        assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/capacity"

    def test_a_services_url_sets_its_host_and_path(self, helm: Path, tmp_path: Path) -> None:
        services = {
            "route": {
                "services": [
                    {
                        "namespace": "prod",
                        "name": "llama",
                        "url": "http://llm.example.com:8000/prod/llama/",
                    }
                ]
            },
            "pollPath": "/v1/capacity",
        }
        route = find(render(helm, tmp_path, ROUTED, services), "HTTPRoute")
        assert route["spec"]["hostnames"] == ["llm.example.com"]
        assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/prod/llama/v1/capacity"

    def test_one_route_per_service_with_distinct_names(self, helm: Path, tmp_path: Path) -> None:
        services = {
            "route": {
                "services": [
                    {"namespace": "a", "name": "svc"},
                    {"namespace": "b", "name": "svc"},
                ]
            }
        }
        routes = [d for d in render(helm, tmp_path, ROUTED, services) if d["kind"] == "HTTPRoute"]
        assert len({r["metadata"]["name"] for r in routes}) == 2

    def test_a_route_needs_the_gateway(self, helm: Path, tmp_path: Path) -> None:
        no_gateway = {"route": {**ROUTED["route"], "gateway": {"name": "", "namespace": ""}}}
        assert "route.gateway.name is required" in refused(helm, tmp_path, no_gateway)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"route": {"hostScheme": "subdomain"}}, "/route/hostScheme"),
        ({"pollPath": "capacity"}, "/pollPath"),
        ({"health": {"timeout": "1"}}, "/health/timeout"),
        ({"route": {"services": [{"name": "x"}]}}, "/route/services/0"),
    ],
)
def test_the_schema_refuses_values_that_cannot_work(
    helm: Path, tmp_path: Path, value: dict[str, Any], where: str
) -> None:
    assert where in refused(helm, tmp_path, value)
