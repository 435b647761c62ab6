"""The routing controller as a child process of the demo, with its log in a file.

The child leads its own session, so a Ctrl-C in the terminal reaches only the demo, which
then stops the controller itself (SIGTERM, then SIGKILL after a grace period). Started from
the main thread, the child also asks the kernel to kill it if the demo dies without cleaning
up (PR_SET_PDEATHSIG), so that not even a SIGKILLed demo leaves a controller behind.

Errors: `ControllerError` (exited while starting, or never served `/readyz`); its message
ends with the tail of the controller's log.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

_PR_SET_PDEATHSIG = 1
# Loopback only: never send these requests through a proxy from the environment.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ControllerError(RuntimeError):
    """The controller did not start."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """Status and body of a GET to a loopback URL."""
    try:
        with _opener.open(url, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class ControllerProcess:
    """`ome-routing controller ARGS...` with its output appended to `log`."""

    def __init__(self, args: Sequence[str], log: Path, metrics_port: int, cwd: Path) -> None:
        self.cwd = cwd
        self.argv = [sys.executable, "-m", "ome_routing.cli.main", "controller", *args]
        self.log = log
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self._ready_url = f"http://127.0.0.1:{metrics_port}/readyz"
        self._child: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def start(self, timeout: float = 30.0) -> Self:
        die_with_parent = threading.current_thread() is threading.main_thread()
        parent = os.getpid()
        libc = ctypes.CDLL(None, use_errno=True) if die_with_parent else None

        def preexec() -> None:
            if libc is not None:
                libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != parent:  # the parent died before prctl took effect
                    os._exit(1)

        with self.log.open("ab") as sink:
            self._child = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec if die_with_parent else None,
                close_fds=True,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        assert self._child is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._child.poll() is not None:
                raise ControllerError(
                    f"the controller exited with status {self._child.returncode} while "
                    f"starting; the end of {self.log}:\n{tail(self.log)}"
                )
            with contextlib.suppress(OSError):
                if http_get(self._ready_url, timeout=1.0)[0] == 200:
                    return
            time.sleep(0.2)
        raise ControllerError(
            f"the controller did not answer {self._ready_url} within {timeout:.0f}s; "
            f"the end of {self.log}:\n{tail(self.log)}"
        )

    def metrics(self) -> str:
        return http_get(self.metrics_url)[1]

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the controller's process group, SIGKILL it after `grace`, and reap it."""
        child, self._child = self._child, None
        if child is None or child.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
