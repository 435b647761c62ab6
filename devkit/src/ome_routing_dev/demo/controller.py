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
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.processes import tail

# Loopback only: never send these requests through a proxy from the environment.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ControllerError(RuntimeError):
    """The controller did not start."""


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """Status and body of a GET to a loopback URL."""
    try:
        with _opener.open(url, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


class ControllerProcess:
    """`ome-routing controller ARGS...` with its output appended to `log`."""

    def __init__(
        self, args: Sequence[str], log: Path, metrics_port: int, cwd: Path, *, probe_port: int
    ) -> None:
        self.cwd = cwd
        self.argv = [sys.executable, "-m", "ome_routing.cli.main", "controller", *args]
        self.log = log
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self._ready_url = f"http://127.0.0.1:{probe_port}/readyz"
        self._child: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def start(self, timeout: float = 30.0) -> Self:
        self._child = processes.spawn(
            "controller", self.argv, self.log, outlive_parent=False, cwd=self.cwd
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
        if child is not None:
            processes.terminate(processes.identify("controller", child), grace, child)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
