"""The private name resolution the gateway (and a controller polling homes) runs with.

A command wrapped by `NameSandbox` resolves mapped names from the private hosts file, and
any query that still goes to DNS reaches the sandbox's recorder on loopback, nowhere else.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ome_routing_dev.devcluster.gateway_names import NameSandbox, NamesError


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[NameSandbox]:
    names = NameSandbox(tmp_path, {"chat.prod.worker-a.example.com": "127.0.0.2"}).start()
    try:
        yield names
    finally:
        names.stop()


def run(sandbox: NameSandbox, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        sandbox.wrap(argv), capture_output=True, text=True, timeout=30, check=False
    )


def test_a_mapped_name_resolves_to_its_loopback_address(sandbox: NameSandbox) -> None:
    result = run(sandbox, "getent", "ahostsv4", "chat.prod.worker-a.example.com")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "127.0.0.2"


def test_a_name_added_later_is_seen_by_a_running_namespace(sandbox: NameSandbox) -> None:
    sandbox.add_hosts({"chat.prod.worker-b.example.com": "127.0.0.3"})
    result = run(sandbox, "getent", "ahostsv4", "chat.prod.worker-b.example.com")
    assert result.stdout.split()[0] == "127.0.0.3"


def test_an_unmapped_name_is_asked_of_the_recorder_only(sandbox: NameSandbox) -> None:
    result = run(sandbox, "getent", "ahostsv4", "nowhere.example.com")
    assert result.returncode != 0
    assert "nowhere.example.com" in {q.name for q in sandbox.recorder.queries}
    resolv = run(sandbox, "cat", "/etc/resolv.conf").stdout
    assert f"nameserver {sandbox.recorder.address}" in resolv.splitlines()
    assert [line for line in resolv.splitlines() if line.startswith("nameserver")] == [
        f"nameserver {sandbox.recorder.address}"
    ]


def test_the_host_outside_the_namespace_keeps_its_own_files(sandbox: NameSandbox) -> None:
    run(sandbox, "true")
    assert "chat.prod.worker-a.example.com" not in Path("/etc/hosts").read_text()


def test_a_name_mapped_to_a_non_loopback_address_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NamesError, match="is not a loopback address"):
        NameSandbox(tmp_path, {"chat.example.com": "10.0.0.1"})


def test_adding_names_only_appends_to_the_file_the_namespace_sees(sandbox: NameSandbox) -> None:
    """A resolver reading the file while names are added never finds it without the old ones."""
    before = sandbox.hosts_file.read_text()
    inode = sandbox.hosts_file.stat().st_ino
    sandbox.add_hosts({"chat.prod.worker-c.example.com": "127.0.0.4"})
    after = sandbox.hosts_file.read_text()
    assert after.startswith(before)
    assert after.removeprefix(before) == "127.0.0.4\tchat.prod.worker-c.example.com\n"
    assert sandbox.hosts_file.stat().st_ino == inode


def test_a_name_cannot_be_moved_to_another_address(sandbox: NameSandbox) -> None:
    sandbox.add_hosts({"chat.prod.worker-a.example.com": "127.0.0.2"})  # the same: a no-op
    with pytest.raises(NamesError, match=r"already maps to 127\.0\.0\.2"):
        sandbox.add_hosts({"chat.prod.worker-a.example.com": "127.0.0.9"})
