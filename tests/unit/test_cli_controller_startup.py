"""`ome-routing controller` at startup: what it logs about the operator config before it runs.

The config is read before the API server is contacted, so these run the installed command
with a values file and no cluster: the process stops at the config, or right after it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMAND = Path(sys.executable).parent / "ome-routing"
CAPACITY_KEYS = "path, method, format, options, samples, quorum, period, timeout, maxAge"


def start(tmp_path: Path, values: str) -> tuple[int, list[str]]:
    """Run the controller with `values` and no cluster; its exit code and log lines."""
    path = tmp_path / "values.yaml"
    path.write_text(values)
    result = subprocess.run(
        [
            str(COMMAND),
            "controller",
            "--config",
            str(path),
            "--kubeconfig",
            str(tmp_path / "no-kubeconfig"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.returncode, result.stderr.splitlines()


def level_and_message(line: str) -> tuple[str, str]:
    _time, level, _logger, message = line.split("\t", 3)
    return level, message


def test_an_unknown_key_is_logged_as_a_warning_and_does_not_stop_the_controller(
    tmp_path: Path,
) -> None:
    values = (EXAMPLES / "values.yaml").read_text() + "          peroid: 20s\n"
    code, lines = start(tmp_path, values)
    assert [level_and_message(line) for line in lines] == [
        (
            "WARNING",
            "unknown multi-cluster setting routing.capacity.peroid is ignored "
            f"(known: {CAPACITY_KEYS})",
        ),
        # past the config: it goes on to the API server, which this test does not give it
        ("ERROR", "connect to the API server: no kubeconfig or in-cluster credentials"),
    ]
    assert code == 1


def test_the_warning_comes_before_the_error_it_explains(tmp_path: Path) -> None:
    values = (EXAMPLES / "values.yaml").read_text().replace("period: 10s", "peroid: 10s")
    code, lines = start(tmp_path, values)
    assert [level_and_message(line) for line in lines] == [
        (
            "WARNING",
            "unknown multi-cluster setting routing.capacity.peroid is ignored "
            f"(known: {CAPACITY_KEYS})",
        ),
        (
            "ERROR",
            "invalid multi-cluster configuration: routing.capacity.period must be positive "
            "when routing.capacity.path is set",
        ),
    ]
    assert code == 1


def test_an_unreadable_poll_trust_file_stops_the_controller_naming_field_and_file(
    tmp_path: Path,
) -> None:
    """Ours: the transport settings' files are read at start, before the API server."""
    missing = tmp_path / "ca.crt"
    values = (
        (EXAMPLES / "values.yaml")
        .read_text()
        .replace(
            "        enabled: true\n",
            f"        enabled: true\n        observer:\n          caBundleFile: {missing}\n",
            1,
        )
    )
    assert str(missing) in values
    code, lines = start(tmp_path, values)
    assert [level_and_message(line) for line in lines] == [
        (
            "ERROR",
            f'invalid multi-cluster configuration: routing.observer.caBundleFile "{missing}" '
            "cannot be read: no such file or directory",
        )
    ]
    assert code == 1


def test_a_configmap_name_that_kubernetes_would_refuse_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """--config-map is checked before anything is read, and the error names flag and value."""
    result = subprocess.run(
        [str(COMMAND), "controller", "--config-map", "Inference_Config",
         "--kubeconfig", str(tmp_path / "no-kubeconfig")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert (
        "Invalid value for '--config-map': 'Inference_Config' is not a ConfigMap name"
        in result.stderr
    )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0", "0 is not in the range 1<=x<=1024"),
        ("1025", "1025 is not in the range 1<=x<=1024"),
        ("many", "'many' is not a valid integer range"),
    ],
)
def test_a_shard_count_out_of_range_is_refused_naming_the_flag_and_the_value(
    tmp_path: Path, value: str, why: str
) -> None:
    result = subprocess.run(
        [str(COMMAND), "controller", "--sharding", "--shards", value,
         "--kubeconfig", str(tmp_path / "no-kubeconfig")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"Invalid value for '--shards': {why}." in result.stderr


def test_the_sharding_flags_are_taken_and_the_controller_goes_on_to_its_config(
    tmp_path: Path,
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text((EXAMPLES / "values.yaml").read_text())
    result = subprocess.run(
        [str(COMMAND), "controller", "--sharding", "--shards", "1024", "--config", str(path),
         "--kubeconfig", str(tmp_path / "no-kubeconfig")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert [level_and_message(line) for line in result.stderr.splitlines()] == [
        ("ERROR", "connect to the API server: no kubeconfig or in-cluster credentials")
    ]
    assert result.returncode == 1
