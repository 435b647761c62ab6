"""The ome-resources chart, rendered by the real helm: what the controller and the spec need."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import (
    CHART,
    CONFIGMAP,
    DEPLOYMENT,
    ROOT,
    Render,
    find,
    kinds,
    run_helm,
    template,
)

from ome_routing.core.config import ConfigError, config_from_multicluster
from ome_routing.core.durations import parse_duration
from ome_routing.metrics import RoutingMetrics

EXAMPLES = ROOT / "examples"
CRD_DIR = ROOT / "config" / "crd"
SPEC_OBSERVER = {
    "maxConcurrentReconciles": 8,
    "maxConcurrentRequests": 16,
    "maxResponseBytes": 65536,
    "minPeriod": "1s",
    "maxSamples": 100,
}


def multicluster(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = find(docs, "ConfigMap", CONFIGMAP)
    block = yaml.safe_load(configmap["data"]["multicluster"])
    assert isinstance(block, dict)
    return block


def routing_values(**routing: Any) -> dict[str, Any]:
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": {"enabled": True, **routing}},
            }
        }
    }


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(docs, "Deployment", DEPLOYMENT)


class TestLint:
    @pytest.mark.parametrize("values", [None, EXAMPLES / "values.yaml"])
    def test_helm_lint_passes(self, helm: Path, values: Path | None) -> None:
        args = ["-f", str(values)] if values else []
        result = run_helm(helm, "lint", str(CHART), "--strict", *args)
        assert result.returncode == 0, result.stdout + result.stderr


class TestConfigMap:
    def test_the_specs_values_file_gives_the_specs_poll(self, render: Render) -> None:
        config = config_from_multicluster(multicluster(render(EXAMPLES / "values.yaml")))
        assert config.routing_active
        poll = config.capacity
        assert poll is not None
        assert (poll.path, poll.method, poll.format) == ("/capacity", "GET", "Report")
        assert (poll.samples, poll.quorum) == (10, 2)
        assert (poll.period, poll.timeout, poll.max_age) == (
            parse_duration("10s"),
            parse_duration("3s"),
            parse_duration("30s"),
        )

    def test_by_default_routing_is_off_with_the_specs_observer_limits(self, render: Render) -> None:
        block = multicluster(render())
        assert block["enabled"] is False
        assert block["config"]["routing"]["enabled"] is False
        assert "capacity" not in block["config"]["routing"]
        assert block["config"]["routing"]["observer"] == SPEC_OBSERVER
        assert not config_from_multicluster(block).routing_active

    def test_the_commented_poll_is_the_specs_example(self) -> None:
        """Uncommenting the capacity block of values.yaml gives Step 1's poll."""
        text = (CHART / "values.yaml").read_text()
        match = re.search(r"^ *# capacity:\n((?: *#   .*\n)+)", text, re.MULTILINE)
        assert match is not None
        lines = [
            re.sub(r"^ *#   ", "", line).split("#")[0].rstrip()
            for line in match.group(1).splitlines()
        ]
        poll = yaml.safe_load("\n".join(line for line in lines if line.strip()))
        spec = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        assert poll == spec["ome"]["multicluster"]["config"]["routing"]["capacity"]

    @pytest.mark.parametrize("limit", sorted(SPEC_OBSERVER))
    @pytest.mark.parametrize("value", [0, None])
    def test_a_limit_set_to_0_or_null_reaches_the_controller_and_stops_it(
        self, render: Render, limit: str, value: int | None
    ) -> None:
        block = multicluster(render(routing_values(observer={limit: value})))
        assert block["config"]["routing"]["observer"][limit] == value
        with pytest.raises(ConfigError) as error:
            config_from_multicluster(block)
        # A minPeriod of 0 is a duration that is set: OME's duration check refuses it first.
        detail = (
            'routing.observer.minPeriod: "0" must be positive'
            if (limit, value) == ("minPeriod", 0)
            else f"routing.observer.{limit} must be positive when routing is enabled"
        )
        assert str(error.value) == f"invalid multi-cluster configuration: {detail}"

    def test_the_publisher_resyncs_every_minute_by_default(self, render: Render) -> None:
        block = multicluster(render(EXAMPLES / "values.yaml"))
        assert block["config"]["routing"]["publisher"] == {"resyncInterval": "1m"}
        assert config_from_multicluster(block).resync_interval == parse_duration("1m")

    def test_a_resync_interval_set_to_zero_reaches_the_controller_and_stops_it(
        self, render: Render
    ) -> None:
        block = multicluster(render(routing_values(publisher={"resyncInterval": "0s"})))
        with pytest.raises(ConfigError) as error:
            config_from_multicluster(block)
        assert str(error.value) == (
            'invalid multi-cluster configuration: routing.publisher.resyncInterval: "0s" must '
            "be positive when routing is enabled and non-negative otherwise"
        )

    def test_the_guides_endpoint_values_reach_the_controller(self, render: Render) -> None:
        """Step 1 of "Publish a global endpoint"; the chart writes YAML, so quotes survive."""
        values = routing_values()
        values["ome"]["multicluster"]["config"]["endpoint"] = {
            "globalGateway": "gateway-system/global",
            "backendPort": 80,
            "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
            "gatewayBackend": {"rewriteHostname": True},
        }
        endpoint = config_from_multicluster(multicluster(render(values))).endpoint
        assert endpoint.enabled and endpoint.rewrite_hostname
        assert endpoint.global_gateway == "gateway-system/global"
        assert endpoint.host_for("chat", "prod", None) == "chat.prod.global.example.com"

    def test_by_default_nothing_is_published(self, render: Render) -> None:
        block = multicluster(render(routing_values()))
        assert block["config"]["endpoint"]["globalGateway"] == ""
        assert not config_from_multicluster(block).endpoint.enabled

    def test_a_head_poll_passes_the_chart_and_the_controller(self, render: Render) -> None:
        values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        values["ome"]["multicluster"]["config"]["routing"]["capacity"]["method"] = "HEAD"
        poll = config_from_multicluster(multicluster(render(values))).capacity
        assert poll is not None
        assert poll.method == "HEAD"

    def test_a_misspelled_key_passes_the_chart_and_reaches_the_controller_as_a_warning(
        self, render: Render
    ) -> None:
        values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        values["ome"]["multicluster"]["config"]["routing"]["capacity"]["peroid"] = "20s"
        config = config_from_multicluster(multicluster(render(values)))
        assert config.capacity is not None
        assert config.warnings == (
            "unknown multi-cluster setting routing.capacity.peroid is ignored (known: path, "
            "method, format, options, samples, quorum, period, timeout, maxAge)",
        )

    def test_a_limit_left_out_keeps_its_default(self, render: Render) -> None:
        block = multicluster(render(routing_values(observer={"maxSamples": 50})))
        assert block["config"]["routing"]["observer"] == {**SPEC_OBSERVER, "maxSamples": 50}

    @pytest.mark.parametrize("period", ["10", 10])
    def test_a_period_without_a_unit_reaches_the_controller(
        self, render: Render, period: str | int
    ) -> None:
        values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        values["ome"]["multicluster"]["config"]["routing"]["capacity"]["period"] = period
        with pytest.raises(ConfigError) as error:
            config_from_multicluster(multicluster(render(values)))
        assert str(error.value) == (
            'invalid multi-cluster configuration: routing.capacity.period: "10" is not a '
            'duration (use forms like "30s", "5m")'
        )


class TestSchema:
    @pytest.mark.parametrize(
        ("setting", "field"),
        [
            ("ome.multicluster.enabled=yes", "enabled"),
            ("ome.multicluster.config.routing.capacity.samples=ten", "samples"),
            ("ome.multicluster.config.routing.observer.maxSamples=many", "maxSamples"),
            ("ome.multicluster.config.routing.capacity.period=true", "period"),
            ("ome.multicluster.config.routing.publisher.resyncInterval=true", "resyncInterval"),
            ("ome.multicluster.config.routing.publisher.options.zone=1", "zone"),
            ("controller.logFormat=xml", "logFormat"),
        ],
    )
    def test_a_wrong_type_is_rejected_before_anything_is_applied(
        self, helm: Path, setting: str, field: str
    ) -> None:
        result = template(helm, "--set-string" if "=yes" in setting else "--set", setting)
        assert result.returncode != 0
        assert "schema" in result.stderr and field in result.stderr


class TestDeployment:
    def test_the_controller_runs_as_the_spec_names_it(self, render: Render) -> None:
        deploy = deployment(render(EXAMPLES / "values.yaml"))
        assert deploy["metadata"]["namespace"] == "ome"
        labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert deploy["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "ome-routing",
            "app.kubernetes.io/instance": "ome-routing",
        }
        assert "control-plane" not in labels  # OME's pods' label
        container = deploy["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == "ome-routing:0.1.0"
        assert container["command"] == ["ome-routing", "controller"]
        assert "--leader-elect" in container["args"]
        assert "--metrics-bind-address=0.0.0.0:8080" in container["args"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"

    def test_the_probes_have_a_port_of_their_own_apart_from_metrics(self, render: Render) -> None:
        """As a kubebuilder manager: metrics on 8080, /healthz and /readyz on 8081."""
        values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        values.setdefault("controller", {})["healthProbePort"] = 9440
        for docs, port in ((render(EXAMPLES / "values.yaml"), 8081), (render(values), 9440)):
            container = deployment(docs)["spec"]["template"]["spec"]["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports == {"metrics": 8080, "health": port}
            assert f"--health-probe-bind-address=0.0.0.0:{port}" in container["args"]
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"]["port"] == "health", probe

    def test_a_changed_setting_changes_the_pod_template(self, render: Render) -> None:
        """`helm upgrade` with new settings restarts the controller, which reads them once."""
        before = deployment(render(EXAMPLES / "values.yaml"))
        values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
        values["ome"]["multicluster"]["config"]["routing"]["capacity"]["quorum"] = 3
        after_docs = render(values)
        after = deployment(after_docs)
        checksum = after["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        before_sum = before["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        assert checksum != before_sum
        block = find(after_docs, "ConfigMap", CONFIGMAP)["data"]["multicluster"]
        assert checksum == hashlib.sha256(block.rstrip("\n").encode()).hexdigest()

    def test_the_same_settings_keep_the_pod_template(self, render: Render) -> None:
        first = deployment(render(EXAMPLES / "values.yaml"))
        second = deployment(render(EXAMPLES / "values.yaml", {"controller": {"logLevel": "info"}}))
        assert first["spec"]["template"] == second["spec"]["template"]


class TestRbac:
    def test_the_controller_gets_only_what_it_uses(self, render: Render) -> None:
        docs = render()
        cluster_rules = find(docs, "ClusterRole")["rules"]
        publisher = ("get", "list", "watch", "create", "update", "delete")
        assert {
            (r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in cluster_rules
        } == {
            ("ome.io", "inferenceservices", ("get", "list", "watch")),
            # blockOwnerDeletion on a map's ownerReference (OwnerReferencesPermissionEnforcement)
            ("ome.io", "inferenceservices/finalizers", ("update",)),
            ("ome.io", "trafficmaps", ("get", "list", "watch", "create", "patch", "delete")),
            ("ome.io", "trafficmaps/status", ("patch",)),
            ("gateway.networking.k8s.io", "httproutes", publisher),
            ("gateway.networking.k8s.io", "backendtlspolicies", publisher),
            ("", "services", publisher),
        }
        assert all(len(r["apiGroups"]) == 1 and len(r["resources"]) == 1 for r in cluster_rules)
        role = find(docs, "Role")
        assert role["metadata"]["namespace"] == "ome"
        assert {
            (r["resources"][0], tuple(r.get("resourceNames", ())), tuple(r["verbs"]))
            for r in role["rules"]
        } == {
            ("configmaps", ("ome-routing-config",), ("get",)),  # the release's ConfigMap
            ("leases", (), ("create",)),  # a create's name is not known to the authorizer
            ("leases", ("ome-routing-controller",), ("get", "update")),
        }
        account = find(docs, "ServiceAccount")["metadata"]["name"]
        pod = deployment(docs)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account
        for binding in (find(docs, "ClusterRoleBinding"), find(docs, "RoleBinding")):
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": "ome"}
            ]

    @pytest.mark.parametrize(
        "backend",
        [{"hostnameEndpointSlices": True}, {"endpointSlices": {"enabled": True}}],
    )
    def test_endpoint_slices_are_granted_only_with_a_mode_that_writes_them(
        self, render: Render, backend: dict[str, Any]
    ) -> None:
        def slice_rules(values: dict[str, Any] | None) -> list[dict[str, Any]]:
            rules = find(render(values) if values else render(), "ClusterRole")["rules"]
            return [r for r in rules if r["resources"] == ["endpointslices"]]

        assert slice_rules(None) == []
        values = routing_values()
        values["ome"]["multicluster"]["config"]["endpoint"] = {"gatewayBackend": backend}
        assert slice_rules(values) == [
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["get", "list", "watch", "create", "update", "delete"],
            }
        ]

    def test_with_a_route_namespace_services_and_slices_are_written_only_there(
        self, render: Render
    ) -> None:
        """CVE-2021-25740's class of grant: no Service or slice writes across the cluster."""
        values = routing_values()
        values["ome"]["multicluster"]["config"]["endpoint"] = {
            "routeNamespace": "global-routes",
            "gatewayBackend": {"hostnameEndpointSlices": True},
        }
        docs = render(values)
        reads = ["get", "list", "watch"]
        cluster = {r["resources"][0]: r["verbs"] for r in find(docs, "ClusterRole")["rules"]}
        assert cluster["services"] == reads
        assert cluster["endpointslices"] == reads
        role = find(docs, "Role", "ome-routing-publisher")
        assert role["metadata"]["namespace"] == "global-routes"
        assert [(r["resources"], r["verbs"]) for r in role["rules"]] == [
            (["services"], ["create", "update", "delete"]),
            (["endpointslices"], ["create", "update", "delete"]),
        ]
        binding = find(docs, "RoleBinding", "ome-routing-publisher")
        assert binding["metadata"]["namespace"] == "global-routes"
        assert binding["roleRef"]["name"] == "ome-routing-publisher"
        assert [s["name"] for s in binding["subjects"]] == [
            find(docs, "ServiceAccount")["metadata"]["name"]
        ]


def strip_keep(crd: dict[str, Any]) -> dict[str, Any]:
    annotations = crd["metadata"].pop("annotations", {})
    assert annotations in ({}, {"helm.sh/resource-policy": "keep"})
    return crd


class TestCrds:
    def test_the_rendered_crds_are_those_of_config_crd(self, render: Render) -> None:
        """One source: the chart must render exactly the files of config/crd/."""
        rendered = {
            d["metadata"]["name"]: strip_keep(d)
            for d in render({"crds": {"shadowTrafficMap": {"install": True}}})
            if d["kind"] == "CustomResourceDefinition"
        }
        sources = {}
        for path in sorted(CRD_DIR.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            assert "annotations" not in crd["metadata"], f"{path.name}: the chart adds its own"
            sources[crd["metadata"]["name"]] = crd
        assert rendered == sources

    def test_the_chart_reads_the_crds_through_a_link_to_config_crd(self) -> None:
        link = CHART / "files" / "crd"
        assert link.is_symlink()
        assert link.resolve() == CRD_DIR.resolve()

    def test_the_inference_service_crd_can_be_left_to_ome(self, render: Render) -> None:
        docs = render({"crds": {"inferenceService": {"install": False}}})
        names = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
        assert names == {"trafficmaps.ome.io", "workloadclusters.ome.io"}

    def test_crds_are_kept_on_uninstall_unless_told_otherwise(self, render: Render) -> None:
        kept = [d for d in render() if d["kind"] == "CustomResourceDefinition"]
        assert all(
            d["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"} for d in kept
        )
        plain = [
            d for d in render({"crds": {"keep": False}}) if d["kind"] == "CustomResourceDefinition"
        ]
        assert all("annotations" not in d["metadata"] for d in plain)

    def test_no_crds_when_turned_off(self, render: Render) -> None:
        assert "CustomResourceDefinition" not in kinds(render({"crds": {"install": False}}))


class TestMonitoring:
    def test_prometheus_operator_objects_are_off_by_default(self, render: Render) -> None:
        assert kinds(render()) == sorted(
            [
                "ClusterRole",
                "ClusterRoleBinding",
                "ConfigMap",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Deployment",
                "Role",
                "RoleBinding",
                "Service",
                "ServiceAccount",
            ]
        )

    def test_the_alert_fires_when_fallback_homes_stay_above_zero(self, render: Render) -> None:
        docs = render({"metrics": {"prometheusRule": {"enabled": True}}})
        rules = find(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
        alert = next(r for r in rules if r["alert"] == "OMETrafficMapCapacityFallback")
        assert "ome_trafficmap_capacity_fallback_homes" in alert["expr"]
        assert alert["expr"].endswith("> 0")
        assert alert["for"] == "15m"
        assert "{{ $labels.trafficmap }}" in alert["annotations"]["summary"]

    def test_the_service_monitor_scrapes_the_metrics_port_and_keeps_the_gauges_labels(
        self, render: Render
    ) -> None:
        docs = render({"metrics": {"serviceMonitor": {"enabled": True}}})
        monitor = find(docs, "ServiceMonitor")
        service = find(docs, "Service")
        endpoint = monitor["spec"]["endpoints"][0]
        assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "metrics"
        assert endpoint["honorLabels"] is True
        assert set(monitor["spec"]["selector"]["matchLabels"].items()) <= set(
            service["metadata"]["labels"].items()
        )

    def test_the_dashboard_charts_the_routing_metrics(self, render: Render) -> None:
        dashboard = json.loads((CHART / "dashboards" / "ome-routing.json").read_text())
        queries = " ".join(t["expr"] for panel in dashboard["panels"] for t in panel["targets"])
        known = {metric.name for metric in RoutingMetrics().registry.collect()}
        used = set(re.findall(r"\b(ome_[a-z_]+?)(?:_bucket|_total)?\b", queries))
        assert used, "the dashboard queries no metric"
        assert used <= known | {m + "_total" for m in known}
        for metric in (
            "ome_trafficmap_capacity_fallback_homes",
            "ome_routing_capacity_polls_total",
            "ome_routing_capacity_poll_duration_seconds",
            "ome_routing_observer_budget_wait_seconds",
            "ome_routing_trafficmap_writes_total",
            "ome_routing_trafficmap_reconcile_duration_seconds",
            "ome_routing_leader",
            "ome_routing_health_probes_total",
            "ome_routing_probe_gated_homes",
            "ome_trafficmap_publication_fallback",
        ):
            assert metric in queries
        shipped = find(
            render({"dashboards": {"enabled": True}}), "ConfigMap", "ome-routing-dashboard"
        )
        assert json.loads(shipped["data"]["ome-routing.json"]) == dashboard
