"""`ome-routing validate-config` judges and shows the chart's health probe."""

from __future__ import annotations

from click.testing import CliRunner

from ome_routing.cli.main import main

VALUES = """\
ome:
  multicluster:
    enabled: true
    role: control-plane
    config:
      routing:
        enabled: true
        probe:
          path: /v1/models
          method: GET
          acceptStatuses: [200]
          gateStatuses: [404, 500, 502, 503, 504]
          period: 10s
          timeout: {timeout}
          failureThreshold: 3
          successThreshold: 2
          allFailedPolicy: PreserveTraffic
"""


def run(text: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["validate-config", "-f", "-"], input=text)
    return result.exit_code, result.stdout, result.stderr


def test_a_usable_probe_is_shown_after_the_summary() -> None:
    code, out, _ = run(VALUES.format(timeout="3s"))
    assert code == 0
    assert out.splitlines()[1] == (
        "chart probe GET /v1/models, acceptStatuses [200], gateStatuses [404 500 502 503 504], "
        "period 10s, timeout 3s, failureThreshold 3, successThreshold 2, "
        "allFailedPolicy PreserveTraffic"
    )


def test_a_broken_probe_fails_with_omes_message() -> None:
    code, out, err = run(VALUES.format(timeout="10s"))
    assert code == 1
    assert out == ""
    assert err == (
        "invalid multi-cluster configuration: routing.probe.timeout (10s) must be shorter than "
        "routing.probe.period (10s)\n"
    )
