"""The chart's names and labels: Helm's nameOverride/fullnameOverride, none of OME's names in
any namespace, and selectors that match only this release's pods.

OME's names and labels are those of tests/e2e/fixtures/ome-v1.3/ome-resources.yaml, written
from OME v1.3's chart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CONFIGMAP, DEPLOYMENT, ROOT, Render, find, run_helm, template

OME_FIXTURE = ROOT / "tests" / "e2e" / "fixtures" / "ome-v1.3" / "ome-resources.yaml"
NEXT_TO_OME = ROOT / "examples" / "values-next-to-ome.yaml"
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}
EVERYTHING_ON = {
    "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    "dashboards": {"enabled": True},
}


def ome_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(OME_FIXTURE.read_text()) if doc]


def ours(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every object but the CRDs, whose names are OME's on purpose (the same API)."""
    return [d for d in docs if d["kind"] != "CustomResourceDefinition"]


def selects(selector: dict[str, str], labels: dict[str, str] | None) -> bool:
    return all((labels or {}).get(key) == value for key, value in selector.items())


def render_as(
    helm: Path, tmp_path: Path, release: str, namespace: str, *values: dict[str, Any]
) -> list[dict[str, Any]]:
    args: list[str] = []
    for index, item in enumerate(values):
        path = tmp_path / f"values-{index}.yaml"
        path.write_text(yaml.safe_dump(item))
        args += ["-f", str(path)]
    result = run_helm(
        helm, "template", release, str(ROOT / "charts" / "ome-resources"), "-n", namespace, *args
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


class TestNames:
    @pytest.mark.parametrize(
        ("release", "values", "prefix"),
        [
            ("ome-routing", {}, "ome-routing"),
            ("routing", {}, "routing-ome-routing"),
            ("prod-ome-routing", {}, "prod-ome-routing"),
            ("ome-routing", {"fullnameOverride": "edge"}, "edge"),
            ("team-a", {"nameOverride": "router"}, "team-a-router"),
        ],
        ids=["release-holds-the-name", "release-without-it", "release-containing-it",
             "fullnameOverride", "nameOverride"],
    )  # fmt: skip
    def test_every_name_starts_with_the_full_name(
        self,
        helm: Path,
        tmp_path: Path,
        release: str,
        values: dict[str, Any],
        prefix: str,
    ) -> None:
        docs = ours(render_as(helm, tmp_path, release, "team-ns", EVERYTHING_ON, values))
        names = {(d["kind"], d["metadata"]["name"]) for d in docs}
        assert all(name.startswith(prefix) for _kind, name in names), names
        assert ("Deployment", prefix) in names
        assert ("ServiceAccount", prefix) in names
        assert ("ConfigMap", f"{prefix}-config") in names
        assert ("ClusterRole", f"{prefix}-team-ns") in names

    def test_no_name_is_one_of_omes_in_the_same_namespace(self, render: Render) -> None:
        """Installed in OME's namespace, not one namespaced name is OME's; nor any
        cluster-scoped one."""
        omes = {(o["kind"], o["metadata"]["name"]) for o in ome_objects()}
        docs = ours(render(EVERYTHING_ON, NEXT_TO_OME, namespace="ome"))
        mine = {(d["kind"], d["metadata"]["name"]) for d in docs}
        assert not mine & omes
        assert not {name for _kind, name in mine} & {name for _kind, name in omes}

    def test_the_controller_reads_the_configmap_the_chart_writes(self, render: Render) -> None:
        docs = render()
        container = find(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]["containers"][
            0
        ]
        assert f"--config-map={CONFIGMAP}" in container["args"]
        find(docs, "ConfigMap", CONFIGMAP)
        role = find(docs, "Role")
        [configmaps] = [rule for rule in role["rules"] if rule["resources"] == ["configmaps"]]
        assert configmaps["resourceNames"] == [CONFIGMAP]

    def test_a_full_name_override_reaches_the_flag_and_the_role(self, render: Render) -> None:
        docs = render({"fullnameOverride": "edge"})
        container = find(docs, "Deployment", "edge")["spec"]["template"]["spec"]["containers"][0]
        assert "--config-map=edge-config" in container["args"]
        [configmaps] = [r for r in find(docs, "Role")["rules"] if r["resources"] == ["configmaps"]]
        assert configmaps["resourceNames"] == ["edge-config"]
        for binding in (find(docs, "RoleBinding"), find(docs, "ClusterRoleBinding")):
            assert binding["subjects"][0]["name"] == "edge"

    def test_a_long_full_name_still_gives_valid_names(self, helm: Path, tmp_path: Path) -> None:
        long = "a" * 70
        docs = ours(render_as(helm, tmp_path, "r", "n", EVERYTHING_ON, {"fullnameOverride": long}))
        assert all(len(d["metadata"]["name"]) <= 63 for d in docs)
        assert all(not d["metadata"]["name"].endswith("-") for d in docs)
        assert find(docs, "ConfigMap", "a" * 56 + "-config")


class TestLabels:
    def test_the_selectors_are_helms_name_and_instance(self, render: Render) -> None:
        docs = render(EVERYTHING_ON)
        expected = {
            "app.kubernetes.io/name": "ome-routing",
            "app.kubernetes.io/instance": "ome-routing",
        }
        deploy = find(docs, "Deployment", DEPLOYMENT)
        assert deploy["spec"]["selector"]["matchLabels"] == expected
        assert find(docs, "Service")["spec"]["selector"] == expected
        assert find(docs, "ServiceMonitor")["spec"]["selector"]["matchLabels"] == expected
        assert selects(expected, find(docs, "Service")["metadata"]["labels"])

    def test_a_name_override_changes_the_name_label(self, render: Render) -> None:
        deploy = find(render({"nameOverride": "router"}), "Deployment")
        assert deploy["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "router"

    def test_our_selectors_match_none_of_omes_objects(self, render: Render) -> None:
        docs = render(EVERYTHING_ON, NEXT_TO_OME, namespace="ome")
        selectors = [
            find(docs, "Deployment")["spec"]["selector"]["matchLabels"],
            find(docs, "Service")["spec"]["selector"],
            find(docs, "ServiceMonitor")["spec"]["selector"]["matchLabels"],
        ]
        for ome in ome_objects():
            pod_labels = ome.get("spec", {}).get("template", {}).get("metadata", {}).get("labels")
            for selector in selectors:
                assert not selects(selector, ome["metadata"].get("labels")), ome["metadata"]
                assert not selects(selector, pod_labels), ome["metadata"]

    def test_omes_selectors_match_none_of_our_pods(self, render: Render) -> None:
        """OME's Services and Deployment select `control-plane: ome-controller-manager`: our
        pods must not carry it, or OME's webhook Service would send requests to them."""
        pod_labels = find(render(NEXT_TO_OME, namespace="ome"), "Deployment")["spec"]["template"][
            "metadata"
        ]["labels"]
        ome_selectors = [o["spec"]["selector"] for o in ome_objects() if o["kind"] == "Service"]
        ome_selectors += [
            o["spec"]["selector"]["matchLabels"]
            for o in ome_objects()
            if o["kind"] in {"Deployment", "DaemonSet"}
        ]
        assert ome_selectors
        for selector in ome_selectors:
            assert not selects(selector, pod_labels)


class TestNextToOmeValues:
    def test_the_values_file_installs_no_crd(self, render: Render) -> None:
        docs = render(NEXT_TO_OME)
        assert not [
            d for d in docs if d["kind"] in CLUSTER_SCOPED - {"ClusterRole", "ClusterRoleBinding"}
        ]

    def test_the_values_file_is_lint_clean(self, helm: Path) -> None:
        result = run_helm(
            helm, "lint", str(ROOT / "charts" / "ome-resources"), "-f", str(NEXT_TO_OME)
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def test_the_values_file_passes_validate_config(self) -> None:
        import subprocess
        import sys

        command = Path(sys.executable).parent / "ome-routing"
        result = subprocess.run(
            [str(command), "validate-config", "-f", str(NEXT_TO_OME)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr


def test_template_renders_the_release_the_tests_name(helm: Path) -> None:
    """The helpers' constants are the chart's names for the release they render."""
    docs = [d for d in yaml.safe_load_all(template(helm).stdout) if d]
    find(docs, "Deployment", DEPLOYMENT)
    find(docs, "ConfigMap", CONFIGMAP)
