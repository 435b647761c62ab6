"""The chart's alert rules, tested as Prometheus users test theirs: with promtool.

The PrometheusRule that `metrics.prometheusRule.enabled` renders is written out as a
Prometheus rule file; `promtool check rules` checks it and `promtool test rules` runs the cases
of tests/chart/alerts/ome-routing.test.yaml on it (and, rendered with
`controller.sharding.enabled`, those of alerts/ome-routing-sharding.test.yaml too). Every rule of the chart must have a case
where it fires (with its exact labels and annotations) and one where it does not, and a rule
with `for:` one where it waits: a new rule without cases fails here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import Render, find

ALERT_TESTS = Path(__file__).parent / "alerts" / "ome-routing.test.yaml"
SHARD_ALERT_TESTS = Path(__file__).parent / "alerts" / "ome-routing-sharding.test.yaml"
ENABLED = {"metrics": {"prometheusRule": {"enabled": True}}}
SHARDED = {**ENABLED, "controller": {"sharding": {"enabled": True}}}
#: the renders whose rules are tested, and the case files that cover them
RENDERS = {
    "unsharded": (ENABLED, (ALERT_TESTS,)),
    "sharded": (SHARDED, (ALERT_TESTS, SHARD_ALERT_TESTS)),
}
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def prometheus_seconds(text: str) -> float:
    """A Prometheus duration (`15m`, `1h30m`, `500ms`) in seconds."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(number) * _UNITS[unit] for number, unit in parts)


def chart_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every rule of the rendered PrometheusRule, in order."""
    groups = find(docs, "PrometheusRule")["spec"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def uncovered(rules: list[dict[str, Any]], tests: dict[str, Any]) -> list[str]:
    """What the promtool test file lacks for these rules: one line per missing case."""
    # alert name -> (test group, eval time in seconds, fires) of each case
    cases: dict[str, list[tuple[int, float, bool]]] = {}
    exprs: list[str] = []
    for index, group in enumerate(tests.get("tests") or []):
        for case in group.get("alert_rule_test") or []:
            seen = (index, prometheus_seconds(case["eval_time"]), bool(case.get("exp_alerts")))
            cases.setdefault(case["alertname"], []).append(seen)
        exprs += [case["expr"] for case in group.get("promql_expr_test") or []]
    missing: list[str] = []
    for rule in rules:
        if "record" in rule:
            if not any(re.search(rf"\b{re.escape(rule['record'])}\b", e) for e in exprs):
                missing.append(f"{rule['record']}: no promql_expr_test reads it")
            continue
        name, found = rule["alert"], cases.get(rule["alert"], [])
        if not any(fires for _, _, fires in found):
            missing.append(f"{name}: no case where it fires")
        if not any(not fires for _, _, fires in found):
            missing.append(f"{name}: no case where it does not fire")
        if rule.get("for") and not _waits(found, prometheus_seconds(str(rule["for"]))):
            missing.append(
                f"{name}: no case where it does not fire yet, less than for ({rule['for']}) "
                "before a case of the same test where it fires"
            )
    return missing


def _waits(found: list[tuple[int, float, bool]], hold: float) -> bool:
    return any(
        quiet_group == group and 0 < at - quiet_at < hold
        for quiet_group, quiet_at, quiet in found
        if not quiet
        for group, at, fires in found
        if fires
    )


def write_rules(
    docs: list[dict[str, Any]], folder: Path, cases: tuple[Path, ...] = (ALERT_TESTS,)
) -> Path:
    """The PrometheusRule's groups as a Prometheus rule file, beside a copy of the cases."""
    groups = find(docs, "PrometheusRule")["spec"]["groups"]
    (folder / "ome-routing.rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    for path in cases:
        shutil.copyfile(path, folder / path.name)
    return folder / "ome-routing.rules.yaml"


def promtool_run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, check=False
    )


def failed_cases(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The cases `promtool test rules` reports as failed: `ALERT at EVAL_TIME` each."""
    found = re.findall(r"alertname: (\S+), time: (\S+),", result.stderr)
    return [f"{alert} at {at}" for alert, at in found]


def alert_tests(*paths: Path) -> dict[str, Any]:
    """The cases of these files (ome-routing.test.yaml by default) as one test file."""
    groups: list[Any] = []
    for path in paths or (ALERT_TESTS,):
        tests = yaml.safe_load(path.read_text())
        assert isinstance(tests, dict)
        groups += tests.get("tests") or []
    return {"tests": groups}


class TestChartAlertRules:
    @pytest.mark.parametrize(
        "values",
        [
            {},
            {"fallbackFor": "1h30m", "severity": "critical", "labels": {"role": "alerts"}},
            {"shardUnownedFor": "90s", "severity": "critical"},
        ],
        ids=["defaults", "custom", "custom-shards"],
    )
    @pytest.mark.parametrize("sharding", [False, True], ids=["unsharded", "sharded"])
    def test_promtool_checks_the_rendered_rules(
        self,
        render: Render,
        promtool: Path,
        tmp_path: Path,
        values: dict[str, Any],
        sharding: bool,
    ) -> None:
        docs = render(
            {
                "metrics": {"prometheusRule": {"enabled": True, **values}},
                "controller": {"sharding": {"enabled": sharding}},
            }
        )
        rules = write_rules(docs, tmp_path)
        result = promtool_run(promtool, "check", "rules", str(rules))
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"SUCCESS: {len(chart_rules(docs))} rules found" in result.stdout

    @pytest.mark.parametrize("name", RENDERS)
    def test_every_rule_has_a_case_where_it_fires_and_one_where_it_does_not(
        self, render: Render, name: str
    ) -> None:
        values, cases = RENDERS[name]
        rules = chart_rules(render(values))
        assert rules, "the PrometheusRule renders no rule"
        assert uncovered(rules, alert_tests(*cases)) == []

    @pytest.mark.parametrize("name", RENDERS)
    def test_promtool_passes_every_case(
        self, render: Render, promtool: Path, tmp_path: Path, name: str
    ) -> None:
        values, cases = RENDERS[name]
        write_rules(render(values), tmp_path, cases)
        files = [str(tmp_path / path.name) for path in cases]
        result = promtool_run(promtool, "test", "rules", *files)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout
        assert failed_cases(result) == []


class TestTheCasesCanFail:
    """The harness is not vacuous: a changed rule or a wrong expectation fails promtool."""

    def test_a_shorter_for_fails_the_cases_that_wait(
        self, render: Render, promtool: Path, tmp_path: Path
    ) -> None:
        shorter = {"metrics": {"prometheusRule": {"enabled": True, "fallbackFor": "5m"}}}
        write_rules(render(shorter), tmp_path)
        result = promtool_run(promtool, "test", "rules", str(tmp_path / ALERT_TESTS.name))
        assert result.returncode == 1, result.stdout + result.stderr
        assert failed_cases(result) == [
            "OMETrafficMapCapacityFallback at 14m",
            "OMETrafficMapCapacityFallback at 16m",
            "OMETrafficMapCapacityFallback at 25m",
        ]

    def test_a_shorter_shard_unowned_for_fails_the_case_that_waits(
        self, render: Render, promtool: Path, tmp_path: Path
    ) -> None:
        values = {
            **SHARDED,
            "metrics": {"prometheusRule": {"enabled": True, "shardUnownedFor": "1m"}},
        }
        write_rules(render(values), tmp_path, (SHARD_ALERT_TESTS,))
        result = promtool_run(promtool, "test", "rules", str(tmp_path / SHARD_ALERT_TESTS.name))
        assert result.returncode == 1, result.stdout + result.stderr
        # it fires a minute early, with "for 1m" in its description: the waits and the
        # expected annotations fail
        assert failed_cases(result) == [
            "OmeRoutingShardUnowned at 2m",
            "OmeRoutingShardUnowned at 3m",
            "OmeRoutingShardUnowned at 2m",
            "OmeRoutingShardUnowned at 10m",
        ]

    def test_the_shard_cases_fail_without_the_sharding_rule(
        self, render: Render, promtool: Path, tmp_path: Path
    ) -> None:
        """Rendered without sharding, the rule is absent: its firing cases fail."""
        write_rules(render(ENABLED), tmp_path, (SHARD_ALERT_TESTS,))
        result = promtool_run(promtool, "test", "rules", str(tmp_path / SHARD_ALERT_TESTS.name))
        assert result.returncode == 1, result.stdout + result.stderr
        assert failed_cases(result) == [
            "OmeRoutingShardUnowned at 3m",
            "OmeRoutingShardUnowned at 10m",
        ]

    def test_a_wrong_severity_fails(self, render: Render, promtool: Path, tmp_path: Path) -> None:
        write_rules(render(ENABLED), tmp_path)
        copy = tmp_path / ALERT_TESTS.name
        copy.write_text(copy.read_text().replace("severity: warning", "severity: critical", 1))
        result = promtool_run(promtool, "test", "rules", str(copy))
        assert result.returncode == 1, result.stdout + result.stderr
        assert failed_cases(result) == ["OMETrafficMapCapacityFallback at 15m"]


class TestCoverage:
    def test_a_rule_without_cases_is_reported(self) -> None:
        rule = {"alert": "OMENewAlert", "expr": "up == 0", "for": "5m"}
        assert uncovered([rule], alert_tests()) == [
            "OMENewAlert: no case where it fires",
            "OMENewAlert: no case where it does not fire",
            "OMENewAlert: no case where it does not fire yet, less than for (5m) before a "
            "case of the same test where it fires",
        ]

    def test_a_rule_with_only_a_firing_case_is_reported(self) -> None:
        rule = {"alert": "OMENewAlert", "expr": "up == 0"}
        tests = {
            "tests": [
                {
                    "alert_rule_test": [
                        {"eval_time": "1m", "alertname": "OMENewAlert", "exp_alerts": [{}]}
                    ]
                }
            ]
        }
        assert uncovered([rule], tests) == ["OMENewAlert: no case where it does not fire"]

    def test_a_wait_must_be_shorter_than_for_and_in_the_same_test(self) -> None:
        rule = {"alert": "A", "expr": "up == 0", "for": "15m"}
        quiet = {"eval_time": "1m", "alertname": "A", "exp_alerts": []}
        fires = {"eval_time": "20m", "alertname": "A", "exp_alerts": [{}]}
        apart = {"tests": [{"alert_rule_test": [quiet]}, {"alert_rule_test": [fires]}]}
        too_early = {"tests": [{"alert_rule_test": [quiet, fires]}]}
        waits = {"tests": [{"alert_rule_test": [{**quiet, "eval_time": "19m"}, fires]}]}
        assert len(uncovered([rule], apart)) == 1
        assert len(uncovered([rule], too_early)) == 1
        assert uncovered([rule], waits) == []

    def test_a_recording_rule_needs_an_expression_test(self) -> None:
        rule = {"record": "namespace:ome_fallback_homes:max", "expr": "max(x)"}
        read = {"tests": [{"promql_expr_test": [{"expr": "namespace:ome_fallback_homes:max"}]}]}
        assert uncovered([rule], {"tests": []}) == [
            "namespace:ome_fallback_homes:max: no promql_expr_test reads it"
        ]
        assert uncovered([rule], read) == []

    @pytest.mark.parametrize(
        ("text", "seconds"), [("15m", 900), ("1h30m", 5400), ("500ms", 0.5), ("2d", 172800)]
    )
    def test_prometheus_durations(self, text: str, seconds: float) -> None:
        assert prometheus_seconds(text) == seconds
