"""One failing task stops the replica: its siblings are cancelled before the process reports
the failure and exits with code 1, as OME's manager does when a runnable fails.

The command runs in this process (click's runner) against the local control plane, with
the publisher's `run` made to fail once the routing controller is running.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from controller_harness import ROUTING_ON

from ome_routing.cli.controller import controller
from ome_routing.kube.controller import Controller
from ome_routing.kube.publisher import Publisher


class _Recorder(logging.Handler):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(f"log: {record.getMessage()} {getattr(record, 'task', '')}".strip())


def test_a_failing_task_stops_its_siblings_before_the_replica_exits_1(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    controller_running = asyncio.Event()
    routing_run = Controller.run

    async def watched_routing(self: Controller) -> None:
        controller_running.set()
        try:
            await routing_run(self)
        except asyncio.CancelledError:
            events.append("routing controller cancelled")
            raise

    async def failing_publisher(self: Publisher) -> None:
        await controller_running.wait()
        raise RuntimeError("the publisher broke")

    monkeypatch.setattr(Controller, "run", watched_routing)
    monkeypatch.setattr(Publisher, "run", failing_publisher)
    setup_log = logging.getLogger("ome_routing.setup")
    recorder = _Recorder(events)
    setup_log.addHandler(recorder)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(ROUTING_ON))
    try:
        result = CliRunner().invoke(
            controller,
            [
                "--config", str(values), "--kubeconfig", str(kubeconfig), "-n", "default",
                "--metrics-bind-address", "127.0.0.1:0",
                "--health-probe-bind-address", "127.0.0.1:0",
                "--no-leader-elect",
            ],
        )  # fmt: skip
    finally:
        setup_log.removeHandler(recorder)
    assert result.exit_code == 1, result.output
    failed = "log: Failed to start manager publisher"
    assert failed in events, events
    assert "routing controller cancelled" in events, events
    assert events.index("routing controller cancelled") < events.index(failed), (
        f"the siblings stop before the failure is reported: {events}"
    )
