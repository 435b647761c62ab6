"""Debian's packages for local tools: what is missing, and what a user who is not root is told."""

from __future__ import annotations

import pytest

from ome_routing_dev.devcluster import ToolsError, debian
from ome_routing_dev.devcluster.debian import install_packages, missing_packages


def test_only_the_packages_of_missing_programs_are_named_once_each() -> None:
    programs = {"sh": "dash", "no-such-program-a": "pkg-x", "no-such-program-b": "pkg-x"}
    assert missing_packages(programs) == ["pkg-x"]


def test_nothing_to_install_needs_no_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debian.os, "geteuid", lambda: 1000)
    install_packages([], lambda message: pytest.fail(message), needed_by="bench/probe_lag")


def test_another_user_is_told_which_packages_to_install_as_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(debian.os, "geteuid", lambda: 1000)
    with pytest.raises(ToolsError) as raised:
        install_packages(["nginx-light", "wrk"], print, needed_by="bench/poll_throughput")
    assert str(raised.value) == (
        "bench/poll_throughput needs nginx-light, wrk: install them as root"
    )
