"""How the demo runs what it shows: shell commands as a reader would type them, the
specification's commands checked against their outputs, and waits on the TrafficMap that
narrate each home's state as it changes.

`Commands` is the base of `demo.run.Demo`; the steps (there and in `demo.probes`,
`demo.traffic`) call `run_command` and `wait_for`.

Errors: `DemoError`, a step failed; the message says which, with the relevant log.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ome_routing.demo import spec
from ome_routing.demo.controller import ControllerProcess
from ome_routing.demo.narration import Narrator
from ome_routing.demo.scene import home_states
from ome_routing.devcluster import LocalControlPlane
from ome_routing.devcluster.processes import tail


class DemoError(RuntimeError):
    """A step of the demo failed."""


class Commands:
    """Shell commands and TrafficMap waits, for a demo with a control plane and a controller."""

    say: Narrator
    repo: Path
    plane: LocalControlPlane | None
    controller: ControllerProcess | None
    matched: bool
    _shown: dict[str, str]  # each home's state as last narrated

    def run_command(self, command: str) -> str:
        """Run a shell command as shown and print its output; a failure fails the step."""
        return self._run(command)

    def wait_for(
        self, done: Callable[[Mapping[str, Any]], bool], timeout: float, what: str
    ) -> None:
        """Wait until the TrafficMap satisfies `done`, narrating the homes' capacity states."""
        self._wait(done, timeout, what)

    def _run(self, command: str) -> str:
        """Run a shell command as shown, print its output, and fail the step if it fails."""
        self.say.command(command)
        result = self._sh(command)
        self.say.output(result.stdout + result.stderr)
        if result.returncode != 0:
            raise DemoError(f"`{command}` failed with exit status {result.returncode}")
        return result.stdout

    def _check(self, command: spec.SpecCommand) -> None:
        """Run a command of the specification, print its output, and compare it."""
        self.say.command(command.command)
        result = self._sh(command.command)
        self.say.output(result.stdout + result.stderr)
        ok = result.returncode == 0 and command.matches(result.stdout)
        self.matched &= ok
        self.say.verdict(ok, command.where)
        if not ok:
            self.say.output(command.expected)

    def _sh(self, command: str) -> subprocess.CompletedProcess[str]:
        assert self.plane is not None
        return subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=self.repo,
            env=self.plane.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def _wait(self, done: Callable[[Mapping[str, Any]], bool], timeout: float, what: str) -> None:
        """Poll the TrafficMap until `done`, narrating each home's state as it changes."""
        assert self.plane is not None and self.controller is not None
        started = time.monotonic()
        shown = self._shown
        while True:
            trafficmap = self._trafficmap()
            if trafficmap is not None:
                for cluster, state in sorted(home_states(trafficmap).items()):
                    if shown.get(cluster) != state:
                        shown[cluster] = state
                        self.say.detail(f"{time.monotonic() - started:5.1f}s  {cluster}: {state}")
                if done(trafficmap):
                    return
            if time.monotonic() - started > timeout:
                raise DemoError(
                    f"gave up waiting for {what} after {timeout:.0f}s; "
                    f"the end of the controller's log ({self.controller.log}):\n"
                    f"{tail(self.controller.log)}"
                )
            time.sleep(0.5)

    def _trafficmap(self) -> dict[str, Any] | None:
        assert self.plane is not None
        result = self.plane.kubectl(
            "get", "trafficmap", spec.NAME, "-n", spec.NAMESPACE, "-o", "json", check=False
        )
        if result.returncode != 0:
            return None
        loaded: dict[str, Any] = json.loads(result.stdout)
        return loaded
