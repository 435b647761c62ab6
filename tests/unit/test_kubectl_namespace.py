"""The namespace every `kubectl ome traffic` command works in is checked the same way.

`status`, `diff` and `history` resolve it with `kubectl_common.resolved_namespace`: `-n`
if given, else the context's; empty or not a DNS-1123 label stops the command before
any request (the kubeconfig names a closed port, so a request would fail otherwise).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ome_routing.cli import kubectl_ome

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: "%s"}
current-context: x
"""

COMMANDS = [
    ["traffic", "status", "llama"],
    ["traffic", "diff", "llama"],
    ["traffic", "history", "llama"],
]


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], context_ns: str = ""
) -> tuple[int, str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG % context_ns)
    code = kubectl_ome.run([*args, "--kubeconfig", str(kubeconfig)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[1])
def test_an_empty_namespace_is_refused_by_every_traffic_command(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(tmp_path, capsys, [*args, "-n", ""])
    assert (code, err) == (1, "error: resolved namespace must not be empty\n")


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[1])
def test_a_namespace_that_is_no_label_is_refused_by_every_traffic_command(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(tmp_path, capsys, args, context_ns="Team_A")
    assert code == 1
    assert err.startswith("error: invalid resolved namespace: ")


def test_history_refuses_a_map_name_that_is_no_subdomain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(tmp_path, capsys, ["traffic", "history", "Bad_Name", "-n", "team-a"])
    assert code == 1
    assert err.startswith('error: invalid TrafficMap name "Bad_Name": ')
