"""`ome-routing validate-config -f values.yaml`: the controller's startup check, ahead of time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ome_routing.cli.main import main
from ome_routing.cli.validate import convergence_lines, merge_values, summarize
from ome_routing.core.config import OperatorConfig, config_from_values

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
STEP1 = EXAMPLES / "values.yaml"
VALID = "multi-cluster configuration is valid: "
LIMITS = (
    "observer limits maxConcurrentReconciles 8, maxConcurrentRequests 16, "
    "maxResponseBytes 65536, minPeriod 1s, maxSamples 100"
)
STEP1_SUMMARY = (
    VALID + "routing on; chart poll GET /capacity, format Report, samples 10, quorum 2, "
    "period 10s, timeout 3s, maxAge 30s; " + LIMITS
)
STEP1_BOUNDS = (
    "chart poll convergence: a drop in the count applies at the 2nd poll that reads it "
    "(quorum 2): 20s at period 10s\n"
    "chart poll convergence: a rise in the count applies by the 2nd poll that reads it "
    "(3 readings within maxAge 30s, minus quorum 2, plus 1): 20s at period 10s\n"
    "chart poll convergence: a frozen reporter loses the ceiling within maxAge (30s) of its "
    "last observedAt\n"
    "chart poll convergence: a failed poll keeps the admitted replicas for at least quorum (2) "
    "polls: 20s at period 10s\n"
)
STEP1_OUTPUT = STEP1_SUMMARY + "\n" + STEP1_BOUNDS
ROUTING_ON = """\
ome:
  multicluster:
    enabled: true
    role: control-plane
    config:
      routing:
        enabled: true
"""


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["validate-config", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def a_values_file(tmp_path: Path, text: str, name: str = "values.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def step1_with(old: str, new: str) -> str:
    text = STEP1.read_text()
    assert old in text
    return text.replace(old, new)


class TestUsableValues:
    def test_the_spec_step1_file_is_usable_and_summarized_with_its_bounds(self) -> None:
        code, out, err = run("-f", str(STEP1))
        assert (code, out, err) == (0, STEP1_OUTPUT, "")

    def test_the_bounds_follow_the_chart_poll(self, tmp_path: Path) -> None:
        text = step1_with("quorum: 2", "quorum: 3").replace("maxAge: 30s", "maxAge: 2m")
        code, out, _ = run("-f", a_values_file(tmp_path, text))
        assert code == 0
        assert out.splitlines()[1:] == [
            "chart poll convergence: a drop in the count applies at the 3rd poll that reads it "
            "(quorum 3): 30s at period 10s",
            "chart poll convergence: a rise in the count applies by the 8th poll that reads it "
            "(samples 10, minus quorum 3, plus 1): 1m20s at period 10s",
            "chart poll convergence: a frozen reporter loses the ceiling within maxAge (2m0s) of "
            "its last observedAt",
            "chart poll convergence: a failed poll keeps the admitted replicas for at least "
            "quorum (3) polls: 30s at period 10s",
        ]

    def test_routing_on_without_a_chart_poll(self, tmp_path: Path) -> None:
        code, out, _ = run("-f", a_values_file(tmp_path, ROUTING_ON))
        assert code == 0
        assert out == VALID + "routing on; no chart poll; " + LIMITS + "\n"

    def test_raised_limits_show_in_the_summary(self, tmp_path: Path) -> None:
        text = (
            ROUTING_ON
            + "        observer:\n          maxSamples: 500\n          minPeriod: 500ms\n"
        )
        code, out, _ = run("-f", a_values_file(tmp_path, text))
        assert code == 0
        assert "minPeriod 500ms, maxSamples 500" in out

    @pytest.mark.parametrize(
        ("text", "gates"),
        [
            (
                "",
                "multicluster.enabled is not true; multicluster.role is not control-plane; "
                "routing.enabled is not true",
            ),
            (
                "image: {tag: v1}\n",
                "multicluster.enabled is not true; multicluster.role is not "
                "control-plane; routing.enabled is not true",
            ),
            (
                ROUTING_ON.replace("role: control-plane", 'role: ""'),
                "multicluster.role is not control-plane",
            ),
            (
                ROUTING_ON.replace("        enabled: true\n", "        enabled: false\n"),
                "routing.enabled is not true",
            ),
        ],
        ids=["empty", "no-multicluster", "no-role", "routing-disabled"],
    )
    def test_routing_off_says_which_gate_is_closed(
        self, tmp_path: Path, text: str, gates: str
    ) -> None:
        code, out, _ = run("-f", a_values_file(tmp_path, text))
        assert code == 0
        assert out.startswith(f"{VALID}routing off ({gates}); ")

    @pytest.mark.parametrize(
        ("text", "checked"),
        [
            ("", "routing blocks not checked"),
            (
                ROUTING_ON.replace("        enabled: true\n", "        enabled: false\n"),
                "only the syntax of routing durations checked",
            ),
            (ROUTING_ON.replace("role: control-plane", 'role: ""'), "routing blocks checked"),
        ],
        ids=["no-multicluster", "routing-disabled", "no-role"],
    )
    def test_routing_off_says_how_much_was_checked(
        self, tmp_path: Path, text: str, checked: str
    ) -> None:
        """As OME: durations whenever multi-cluster is on; every rule once routing is on."""
        code, out, _ = run("-f", a_values_file(tmp_path, text))
        assert code == 0
        assert out.endswith(f"; {checked}\n")

    def test_values_can_come_from_stdin(self) -> None:
        code, out, _ = run("-f", "-", stdin=STEP1.read_text())
        assert (code, out) == (0, STEP1_OUTPUT)

    def test_several_files_merge_as_helm_merges_them_the_later_winning(
        self, tmp_path: Path
    ) -> None:
        override = a_values_file(
            tmp_path,
            "ome:\n  multicluster:\n    config:\n      routing:\n        capacity:\n"
            "          period: 500ms\n          timeout: 100ms\n",
            "override.yaml",
        )
        code, _, err = run("-f", str(STEP1), "-f", override)
        assert code == 1
        assert err == (
            "invalid multi-cluster configuration: routing.capacity.period (500ms) must be at "
            "least routing.observer.minPeriod (1s)\n"
        )


class TestUnusableValues:
    @pytest.mark.parametrize(
        ("old", "new", "message"),
        [
            (
                "period: 10s",
                "period: 10",
                'routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")',
            ),
            (
                "timeout: 3s",
                "timeout: 10s",
                "routing.capacity.timeout (10s) must be shorter than routing.capacity.period (10s)",
            ),
            (
                "period: 10s\n          timeout: 3s",
                "period: 500ms\n          timeout: 100ms",
                "routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
            ),
            (
                "        enabled: true\n",
                "        enabled: true\n        observer:\n          maxSamples: null\n",
                "routing.observer.maxSamples must be positive when routing is enabled",
            ),
        ],
        ids=["period-unitless", "timeout", "min-period", "max-samples-null"],
    )
    def test_the_controllers_line_goes_to_stderr_with_exit_1(
        self, tmp_path: Path, old: str, new: str, message: str
    ) -> None:
        code, out, err = run("-f", a_values_file(tmp_path, step1_with(old, new)))
        assert (code, out) == (1, "")
        assert err == f"invalid multi-cluster configuration: {message}\n"

    def test_a_typo_is_named_on_its_own_line_before_the_error_it_causes(
        self, tmp_path: Path
    ) -> None:
        code, out, err = run("-f", a_values_file(tmp_path, step1_with("samples: 10", "sample: 10")))
        assert (code, out) == (1, "")
        assert err == (
            "unknown multi-cluster setting routing.capacity.sample is ignored (known: path, "
            "method, format, options, samples, quorum, period, timeout, maxAge)\n"
            "invalid multi-cluster configuration: routing.capacity.samples must be positive "
            "when routing.capacity.path is set\n"
        )

    def test_a_typo_that_breaks_nothing_is_a_warning_with_exit_0(self, tmp_path: Path) -> None:
        text = step1_with("        enabled: true\n", "        enabled: true\n        observr: {}\n")
        code, out, err = run("-f", a_values_file(tmp_path, text))
        assert (code, out) == (0, STEP1_OUTPUT)
        assert err == (
            "unknown multi-cluster setting routing.observr is ignored (known: enabled, "
            "observer, probe, capacity, publisher)\n"
        )

    def test_a_missing_file_is_a_usage_error(self, tmp_path: Path) -> None:
        code, out, err = run("-f", str(tmp_path / "nope.yaml"))
        assert (code, out) == (2, "")
        assert "nope.yaml" in err
        assert "No such file or directory" in err

    def test_the_file_option_is_required(self) -> None:
        code, _, err = run()
        assert code == 2
        assert "Missing option '-f' / '--values'" in err

    def test_invalid_yaml_names_the_file_and_the_place(self, tmp_path: Path) -> None:
        path = a_values_file(tmp_path, "ome:\n  multicluster: [\n")
        code, out, err = run("-f", path)
        assert (code, out) == (1, "")
        assert err.startswith(f"Error: {path} is not valid YAML at line 3, column 1: ")

    def test_a_top_level_list_is_refused(self, tmp_path: Path) -> None:
        path = a_values_file(tmp_path, "- ome\n")
        code, _, err = run("-f", path)
        assert code == 1
        assert err == f"Error: {path} must hold a mapping of values at the top level, got a list\n"


class TestPureParts:
    def test_merge_keeps_explicit_nulls_and_merges_mappings(self) -> None:
        base = {"a": {"b": 1, "c": {"d": 2}}, "e": 3}
        override = {"a": {"c": {"d": None}, "f": 4}, "e": [5]}
        assert merge_values(base, override) == {
            "a": {"b": 1, "c": {"d": None}, "f": 4},
            "e": [5],
        }
        assert base == {"a": {"b": 1, "c": {"d": 2}}, "e": 3}

    def test_summary_of_the_default_config(self) -> None:
        assert summarize(OperatorConfig()).startswith(VALID + "routing off (")

    def test_summary_of_the_spec_step1_config(self) -> None:
        assert summarize(config_from_values(yaml.safe_load(STEP1.read_text()))) == STEP1_SUMMARY

    def test_convergence_lines_of_the_spec_step1_config(self) -> None:
        config = config_from_values(yaml.safe_load(STEP1.read_text()))
        assert "".join(line + "\n" for line in convergence_lines(config)) == STEP1_BOUNDS

    def test_no_convergence_lines_without_a_chart_poll(self) -> None:
        assert convergence_lines(OperatorConfig()) == []


class TestInstalledCommand:
    def test_the_installed_command_validates_both_ways(self, tmp_path: Path) -> None:
        """Through the real console script: good file exit 0, bad file exit 1 on stderr."""
        command = Path(sys.executable).parent / "ome-routing"
        assert command.exists(), f"{command} is not installed"
        good = subprocess.run(
            [str(command), "validate-config", "-f", str(STEP1)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (good.returncode, good.stdout, good.stderr) == (0, STEP1_OUTPUT, "")
        bad_file = a_values_file(tmp_path, step1_with("timeout: 3s", "timeout: 10s"))
        bad = subprocess.run(
            [str(command), "validate-config", "-f", bad_file],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (bad.returncode, bad.stdout) == (1, "")
        assert bad.stderr == (
            "invalid multi-cluster configuration: routing.capacity.timeout (10s) must be "
            "shorter than routing.capacity.period (10s)\n"
        )
