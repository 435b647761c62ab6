"""Child processes of the local control plane: start them so they cannot outlive us, and stop them.

A child runs in its own session (so its whole process group can be signalled) and, unless
it is meant to outlive this process (`ome-routing dev up`), asks the kernel to kill it when
its parent dies (PR_SET_PDEATHSIG), so that even a SIGKILLed test run leaves nothing behind.
A process is named by its pid and its start time (field 22 of /proc/PID/stat), so a pid that
was recycled by the time `dev down` runs is never signalled.

`started` is what the owners of such processes (the control plane, the node, the gateways)
give for a value they have only once `start()` has run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

_PR_SET_PDEATHSIG = 1
_T = TypeVar("_T")


def started(value: _T | None, error: type[Exception], message: str) -> _T:
    """`value`, which `start()` set; before it (None), `error(message)` is raised."""
    if value is None:
        raise error(message)
    return value


@dataclass(frozen=True)
class ProcessId:
    """A process as recorded in a control plane's directory."""

    name: str
    pid: int
    start_time: int

    def is_alive(self) -> bool:
        """True while any thread of the process runs (a zombie whose threads are done does not)."""
        stat = _stat(self.pid)
        if stat is None or stat[1] != self.start_time:
            return False
        return stat[0] != "Z" or _threads(self.pid) > 1


def _threads(pid: int) -> int:
    # A killed process's main thread can be a zombie while its other threads still exit and
    # hold its files, listening sockets included.
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return 0


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of a process, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may hold spaces; fields resume after the last ")".
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def spawn(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    outlive_parent: bool,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session with stdout and stderr appended to `log` (and the file
    descriptors `pass_fds` inherited)."""
    die_with_parent = not outlive_parent and threading.current_thread() is threading.main_thread()
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so it is only safe from the
    # main thread; other callers rely on stop() and the atexit hook.
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True) if die_with_parent else None

    def preexec() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    with log.open("ab") as sink:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec if die_with_parent else None,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )


def identify(name: str, process: subprocess.Popen[bytes]) -> ProcessId:
    """The pid and start time of a process just spawned."""
    stat = _stat(process.pid)
    return ProcessId(name=name, pid=process.pid, start_time=stat[1] if stat else 0)


def terminate(
    process: ProcessId, grace: float, child: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM the process group, SIGKILL it after `grace` seconds, and wait until it is gone."""
    if not process.is_alive():
        _reap(child)
        return
    _signal_group(process, signal.SIGTERM)
    if not _wait_gone(process, child, grace):
        _signal_group(process, signal.SIGKILL)
        if not _wait_gone(process, child, 10.0):
            raise RuntimeError(f"{process.name} (pid {process.pid}) survived SIGKILL")


def _signal_group(process: ProcessId, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if process.is_alive():
            # Each child leads its own session, so its process group id is its pid.
            os.killpg(process.pid, signum)


def _wait_gone(process: ProcessId, child: subprocess.Popen[bytes] | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(child)
        if not process.is_alive():
            return True
        time.sleep(0.02)
    return False


def _reap(child: subprocess.Popen[bytes] | None) -> None:
    if child is not None:
        child.poll()


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that are free on 127.0.0.1 right now."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_listening(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log file, for error messages."""
    try:
        with path.open("rb") as handle:
            return _last_lines(handle, lines)
    except FileNotFoundError:
        return ""


def _last_lines(handle: IO[bytes], lines: int) -> str:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - 16384))
    return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
