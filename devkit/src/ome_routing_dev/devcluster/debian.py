"""Debian's packages that a local tool runs, installed with apt-get when missing.

Used where a program comes from Debian rather than from a build of our own: the local
node's runc, iptables and CNI plugins, the benchmarks' nginx and wrk. apt-get needs
root; as another user the error names the packages to install. Nothing is installed when
every program is already there.

Errors: `ToolsError` (not root, or apt-get failed: the message quotes apt-get's output).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ome_routing_dev.devcluster.tools import Progress, ToolsError

#: Where Debian puts programs for root, off an ordinary user's PATH (nginx is one).
_SBIN = (Path("/usr/sbin"), Path("/sbin"))


def find_program(program: str) -> Path | None:
    """`program` on PATH, else in /usr/sbin or /sbin."""
    found = shutil.which(program)
    if found is not None:
        return Path(found)
    return next((d / program for d in _SBIN if os.access(d / program, os.X_OK)), None)


def missing_packages(programs: Mapping[str, str]) -> list[str]:
    """The packages of `programs` ({program: Debian package}) whose program is missing."""
    missing = [package for program, package in programs.items() if find_program(program) is None]
    return list(dict.fromkeys(missing))


def install_packages(packages: Sequence[str], say: Progress, *, needed_by: str) -> None:
    """Install `packages` with apt-get (as root), updating the package lists only when a
    first install cannot find them; a no-op for none."""
    if not packages:
        return
    if os.geteuid() != 0:
        raise ToolsError(f"{needed_by} needs {', '.join(packages)}: install them as root")
    say(f"installing {' '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(install, capture_output=True, env=env, check=False).returncode != 0:
        _run(["apt-get", "update", "-q"], "apt-get update", env)
        _run(install, "apt-get install", env)


def ensure_programs(
    programs: Mapping[str, str], say: Progress, *, needed_by: str
) -> dict[str, Path]:
    """Each of `programs` ({program: Debian package}), its package installed when missing."""
    install_packages(missing_packages(programs), say, needed_by=needed_by)
    found: dict[str, Path] = {}
    for program in programs:
        path = find_program(program)
        if path is None:
            raise ToolsError(f"{program} is not on PATH after installing it")
        found[program] = path
    return found


def _run(command: list[str], what: str, env: dict[str, str]) -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-3000:]
        raise ToolsError(f"{what} failed ({result.returncode}): {' '.join(command)}\n{output}")
