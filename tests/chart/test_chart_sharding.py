"""The chart past one replica: sharding's flags and grant, a PodDisruptionBudget, the pods
spread over nodes, and the alert on unowned shards; with one replica, the chart as before.

The shard Leases' names are the controller's (`<lease-name>-shard-<n>`, `--lease-name`
from `controller.extraArgs` or `ome-routing-controller`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import DEPLOYMENT, RELEASE, ROOT, Render, find, kinds, run_helm, template

#: the last commit of the chart before sharding, the PodDisruptionBudget and the default
#: anti-affinity: with one replica the chart must render exactly as it did
BEFORE_SHARDING = "a25766395c8d0b2cb903416fe286f58496cbb7c5"
LEASE_GROUP = "routing.ome-routing.io/shard-group"
SELECTOR = {"app.kubernetes.io/name": "ome-routing", "app.kubernetes.io/instance": RELEASE}


def sharded(shards: int | None = None, **controller: Any) -> dict[str, Any]:
    sharding: dict[str, Any] = {"enabled": True}
    if shards is not None:
        sharding["shards"] = shards
    return {"controller": {"sharding": sharding, **controller}}


def args(docs: list[dict[str, Any]]) -> list[str]:
    pod = find(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]
    return list(pod["containers"][0]["args"])


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec = find(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def lease_rules(docs: list[dict[str, Any]]) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The Role's rules on Leases as (resourceNames, verbs)."""
    return {
        (tuple(r.get("resourceNames", ())), tuple(r["verbs"]))
        for r in find(docs, "Role")["rules"]
        if r["resources"] == ["leases"]
    }


def rules_on(docs: list[dict[str, Any]], group: str, resource: str) -> list[dict[str, Any]]:
    return [
        r
        for r in find(docs, "Role")["rules"]
        if r["apiGroups"] == [group] and r["resources"] == [resource]
    ]


def alerts(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups = find(docs, "PrometheusRule")["spec"]["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


class TestOneReplica:
    @pytest.fixture
    def chart_before(self, tmp_path: Path) -> Path:
        """The chart (and the CRDs it links to) as of BEFORE_SHARDING."""
        git = shutil.which("git")
        if git is None or not (ROOT / ".git").exists():
            pytest.skip("not a git checkout: the chart before sharding is not at hand")
        archive = subprocess.run(
            [
                git,
                "-C",
                str(ROOT),
                "archive",
                BEFORE_SHARDING,
                "charts/ome-resources",
                "config/crd",
            ],
            capture_output=True,
            timeout=60,
            check=True,
        )
        subprocess.run(
            ["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, timeout=60, check=True
        )
        return tmp_path / "charts" / "ome-resources"

    @pytest.mark.parametrize(
        "sets",
        [
            [],
            ["--set", "controller.replicas=1"],
            ["--set", "controller.sharding.enabled=false"],
            ["--set", "controller.podDisruptionBudget.enabled=null"],
        ],
        ids=["defaults", "replicas-1", "sharding-off", "pdb-default"],
    )
    def test_the_output_is_byte_identical_to_the_chart_before_sharding(
        self, helm: Path, chart_before: Path, sets: list[str]
    ) -> None:
        before = run_helm(helm, "template", RELEASE, str(chart_before), "--namespace", "ome")
        now = template(helm, *sets)
        assert before.returncode == 0, before.stderr
        assert now.returncode == 0, now.stderr
        assert now.stdout == before.stdout

    def test_no_disruption_budget_and_no_affinity(self, render: Render) -> None:
        docs = render()
        assert "PodDisruptionBudget" not in kinds(docs)
        assert "affinity" not in pod_spec(docs)


class TestShardingFlags:
    def test_off_by_default_the_controller_elects_a_leader(self, render: Render) -> None:
        rendered = args(render())
        assert "--leader-elect" in rendered
        assert not [a for a in rendered if a.startswith(("--sharding", "--shards"))]

    def test_on_the_controller_gets_sharding_and_64_shards_and_keeps_the_lease_timing(
        self, render: Render
    ) -> None:
        rendered = args(render(sharded()))
        timing = [
            "--leader-elect-lease-duration=60s",
            "--leader-elect-renew-deadline=40s",
            "--leader-elect-retry-period=8s",
        ]
        at = rendered.index("--leader-elect")
        assert rendered[at : at + 6] == ["--leader-elect", *timing, "--sharding", "--shards=64"]

    @pytest.mark.parametrize("shards", [1, 7, 1024])
    def test_the_shard_count_reaches_the_controller(self, render: Render, shards: int) -> None:
        assert f"--shards={shards}" in args(render(sharded(shards)))

    @pytest.mark.parametrize(
        ("setting", "field"),
        [
            ("controller.sharding.shards=0", "shards"),
            ("controller.sharding.shards=1025", "shards"),
            ("controller.sharding.shards=many", "shards"),
            ("controller.sharding.enabled=yes", "enabled"),
            ("controller.sharding.shard=8", "shard"),
        ],
    )
    def test_a_bad_value_is_refused_by_the_schema(
        self, helm: Path, setting: str, field: str
    ) -> None:
        result = template(helm, "--set", setting)
        assert result.returncode != 0
        assert "controller.sharding" in result.stderr or "sharding" in result.stderr
        assert field in result.stderr


class TestShardingGrant:
    def test_off_the_leader_lease_is_granted_as_before(self, render: Render) -> None:
        docs = render()
        assert lease_rules(docs) == {
            ((), ("create",)),
            (("ome-routing-controller",), ("get", "update")),
        }
        assert rules_on(docs, "events.k8s.io", "events") == []

    def test_on_the_shard_leases_are_named_and_the_leader_lease_is_not(
        self, render: Render
    ) -> None:
        docs = render(sharded(3))
        shards = tuple(f"ome-routing-controller-shard-{n}" for n in range(3))
        assert lease_rules(docs) == {
            ((), ("create", "list", "watch")),
            (shards, ("get", "update")),
            # the member Lease, whose name holds a hash of the pod's identity (and the
            # leader Lease of the group's name, read to keep off a leader's keys); delete:
            # the member Leases of replicas gone for good
            ((), ("get", "update", "delete")),
        }
        events = rules_on(docs, "events.k8s.io", "events")
        assert [(r.get("resourceNames"), r["verbs"]) for r in events] == [(None, ["create"])]

    def test_all_64_shards_by_default(self, render: Render) -> None:
        names = [n for names, _ in lease_rules(render(sharded())) for n in names]
        assert names == [f"ome-routing-controller-shard-{n}" for n in range(64)]

    @pytest.mark.parametrize(
        "extra",
        [
            ["--lease-name=routing-a"],
            ["--lease-name", "routing-a"],
            ["--lease-name=x", "--lease-name=routing-a"],
        ],
        ids=["equals", "separate", "last-wins"],
    )
    def test_the_shard_names_follow_the_lease_name_of_extra_args(
        self, render: Render, extra: list[str]
    ) -> None:
        names = [n for names, _ in lease_rules(render(sharded(2, extraArgs=extra))) for n in names]
        assert names == ["routing-a-shard-0", "routing-a-shard-1"]

    def test_the_journal_still_gets_its_cluster_wide_grant(self, render: Render) -> None:
        docs = render(sharded(2), {"journal": {"enabled": True}})
        cluster = [r for r in find(docs, "ClusterRole")["rules"] if r["resources"] == ["events"]]
        assert [r["verbs"] for r in cluster] == [["create", "patch"]]
        assert len(rules_on(docs, "events.k8s.io", "events")) == 1


class TestDisruptionBudget:
    @pytest.mark.parametrize("replicas", [2, 3])
    def test_more_than_one_replica_gets_a_budget_of_one_unavailable_pod(
        self, render: Render, replicas: int
    ) -> None:
        docs = render({"controller": {"replicas": replicas}})
        budget = find(docs, "PodDisruptionBudget", DEPLOYMENT)
        assert budget["metadata"]["namespace"] == "ome"
        assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}}
        selector = find(docs, "Deployment", DEPLOYMENT)["spec"]["selector"]
        assert budget["spec"]["selector"] == selector

    def test_turned_off_there_is_none(self, render: Render) -> None:
        docs = render({"controller": {"replicas": 3, "podDisruptionBudget": {"enabled": False}}})
        assert "PodDisruptionBudget" not in kinds(docs)

    def test_turned_on_one_replica_gets_one(self, render: Render) -> None:
        docs = render({"controller": {"podDisruptionBudget": {"enabled": True}}})
        assert find(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1

    @pytest.mark.parametrize("amount", [2, "50%"])
    def test_min_available_in_place_of_max_unavailable(self, render: Render, amount: Any) -> None:
        budget = {"minAvailable": amount, "maxUnavailable": None}
        docs = render({"controller": {"replicas": 3, "podDisruptionBudget": budget}})
        assert find(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == amount
        assert "maxUnavailable" not in find(docs, "PodDisruptionBudget")["spec"]

    def test_a_percentage_of_unavailable_pods(self, render: Render) -> None:
        budget = {"maxUnavailable": "34%"}
        docs = render({"controller": {"replicas": 3, "podDisruptionBudget": budget}})
        assert find(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == "34%"

    @pytest.mark.parametrize(
        ("sets", "message"),
        [
            (
                ["controller.podDisruptionBudget.minAvailable=2"],
                "controller.podDisruptionBudget: set one of maxUnavailable (1) and "
                "minAvailable (2), and the other to null",
            ),
            (
                ["controller.podDisruptionBudget.maxUnavailable=null"],
                "controller.podDisruptionBudget: set one of maxUnavailable (null) and "
                "minAvailable (null), and the other to null",
            ),
        ],
        ids=["both", "neither"],
    )
    def test_exactly_one_amount(self, helm: Path, sets: list[str], message: str) -> None:
        args = ["--set", "controller.replicas=2"]
        for item in sets:
            args += ["--set", item]
        result = template(helm, *args)
        assert result.returncode != 0
        assert message in result.stderr

    def test_an_amount_that_is_not_a_number_or_a_percentage_is_refused(self, helm: Path) -> None:
        result = template(
            helm,
            "--set",
            "controller.replicas=2",
            "--set",
            "controller.podDisruptionBudget.maxUnavailable=half",
        )
        assert result.returncode != 0
        assert "maxUnavailable" in result.stderr


class TestAntiAffinity:
    def test_more_than_one_replica_prefers_nodes_without_another_controller_pod(
        self, render: Render
    ) -> None:
        docs = render({"controller": {"replicas": 2}})
        pod = pod_spec(docs)
        labels = find(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["metadata"]["labels"]
        assert pod["affinity"] == {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": SELECTOR},
                        },
                    }
                ]
            }
        }
        # it selects the controller's own pods, and nothing that only OME's pods carry
        assert SELECTOR.items() <= labels.items()

    def test_the_selector_follows_the_name_override(self, render: Render) -> None:
        docs = render({"controller": {"replicas": 2}, "nameOverride": "routing"})
        term = pod_spec(docs)["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ][0]["podAffinityTerm"]
        assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/name"] == "routing"

    def test_an_affinity_of_the_users_replaces_it(self, render: Render) -> None:
        mine = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        }
        docs = render({"controller": {"replicas": 3, "affinity": mine}})
        assert pod_spec(docs)["affinity"] == mine


class TestShardAlert:
    def test_rendered_only_with_sharding_and_the_rules(self, render: Render) -> None:
        rules = {"metrics": {"prometheusRule": {"enabled": True}}}
        assert "OmeRoutingShardUnowned" not in alerts(render(rules))
        assert "PrometheusRule" not in kinds(render(sharded()))
        alert = alerts(render(rules, sharded()))["OmeRoutingShardUnowned"]
        assert alert["expr"] == "max by (namespace) (ome_routing_shards_unowned) > 0"
        assert alert["for"] == "2m"
        assert alert["labels"] == {"severity": "warning"}

    def test_its_bound_and_the_lease_group_follow_the_values(self, render: Render) -> None:
        rules = {"metrics": {"prometheusRule": {"enabled": True, "shardUnownedFor": "5m"}}}
        docs = render(rules, sharded(extraArgs=["--lease-name=routing-a"]))
        alert = alerts(docs)["OmeRoutingShardUnowned"]
        assert alert["for"] == "5m"
        assert f"{LEASE_GROUP}=routing-a " in alert["annotations"]["description"]
