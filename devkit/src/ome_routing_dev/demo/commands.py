"""How the demo runs what it shows: shell commands as a reader would type them, the
specification's commands checked against their outputs, and waits on the TrafficMap that
narrate each home's state as it changes.

`Commands` is the base of `demo.run.Demo` and `demo.node.NodeDemo`: it runs their steps
(`run`: the logs are kept when a step failed or an output differed, and removed
otherwise), and holds what both walk through alike (the wait for the ceilings, the
fallback's checks, the summary, `--keep`). The steps (there and in `demo.probes`,
`demo.traffic`) call `run_command` and `wait_for`.

Errors: `DemoError`, a step failed; the message says which, with the relevant log.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ome_routing_dev.demo import spec
from ome_routing_dev.demo.controller import ControllerProcess
from ome_routing_dev.demo.narration import Narrator
from ome_routing_dev.demo.scene import capacities, fallback_condition, home_states
from ome_routing_dev.devcluster import LocalControlPlane
from ome_routing_dev.devcluster.processes import tail


class DemoError(RuntimeError):
    """A step of the demo failed."""


class Commands:
    """Shell commands and TrafficMap waits, for a demo with a control plane and a controller."""

    say: Narrator
    repo: Path
    plane: LocalControlPlane | None
    controller: ControllerProcess | None
    matched: bool
    work: Path  # the run's logs: kept when a step failed or an output differed
    _shown: dict[str, str]  # each home's state as last narrated

    def run(self) -> bool:
        """Run every step (`_steps`); True when every output matched the specification."""
        failed = True  # keep the logs of a run that failed, not of one that was interrupted
        try:
            with contextlib.ExitStack() as stack:
                self._steps(stack)
            failed = not self.matched
        except (KeyboardInterrupt, SystemExit):
            failed = False
            raise
        finally:
            if failed:
                self.say.detail(f"logs kept in {self.work}")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        return self.matched

    def _steps(self, stack: contextlib.ExitStack) -> None:
        """The demo's steps; what they start, `stack` stops on the way out."""
        raise NotImplementedError

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

    def _wait_for_ceilings(self, explanation: str, timeout: float) -> None:
        """The step that waits until both homes have a ceiling and no fallback."""
        self.say.step("Wait for both ceilings")
        self.say.say(explanation)
        self._wait(
            lambda m: (
                all("reported" in c for c in capacities(m))
                and len(capacities(m)) == 2
                and fallback_condition(m) == "False"
            ),
            timeout,
            "both homes to get a ceiling",
        )

    def _check_fallback(self, timeout: float) -> None:
        """Wait until worker-b's poll gets a 404 and falls back, then the spec's commands."""
        self._wait(
            lambda m: (
                fallback_condition(m) == "True"
                and home_states(m).get("worker-b", "").startswith("capacity endpoint returned")
            ),
            timeout,
            "worker-b to fall back",
        )
        self._check(spec.FALLBACK_REASONS)
        self._check(spec.CONDITION_FALLBACK)

    def _summary(self) -> None:
        self.say.console.print()
        if self.matched:
            self.say.say("Every output matches the specification.")
        else:
            self.say.error("Some outputs differ from the specification (see DIFFERS above).")

    def _keep_until_interrupted(self, *commands: str) -> None:
        """`--keep`: how to reach the control plane, then `commands`, until Ctrl-C."""
        assert self.plane is not None
        self.say.console.print()
        self.say.say("Everything keeps running until you press Ctrl-C. In another shell:")
        self.say.output(
            f"export KUBECONFIG={shlex.quote(str(self.plane.kubeconfig))}\n"
            f'export PATH={shlex.quote(str(self.plane.bin_dir))}:"$PATH"\n' + "\n".join(commands)
        )
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()

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
        assert self.plane is not None
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
                raise DemoError(f"gave up waiting for {what} after {timeout:.0f}s; {self._log()}")
            time.sleep(0.5)

    def _log(self) -> str:
        """The controller's log, as a failed wait quotes it."""
        assert self.controller is not None
        return (
            f"the end of the controller's log ({self.controller.log}):\n{tail(self.controller.log)}"
        )

    def _trafficmap(self) -> dict[str, Any] | None:
        assert self.plane is not None
        result = self.plane.kubectl(
            "get", "trafficmap", spec.NAME, "-n", spec.NAMESPACE, "-o", "json", check=False
        )
        if result.returncode != 0:
            return None
        loaded: dict[str, Any] = json.loads(result.stdout)
        return loaded
