"""The journal of weight changes on the local control plane (`routing.journal.enabled`).

A reporter whose readings drop lowers a home's weight: the controller writes an
`events.k8s.io/v1` Event on the TrafficMap with the cause in words, logs the same facts
in one line, and `kubectl ome traffic history` prints it. With the journal off (the
default) the same change writes no Event and no journal line. `history` of a map that
does not exist names it. An Event write the API server refuses (the controller's
ServiceAccount without the journal's grant) is logged, and the weights still move; a
repeat of an Event the API server no longer holds creates it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from controller_harness import (
    ROUTING_ON,
    ControllerProcess,
    Reporter,
    eventually,
    get_map,
    kubectl,
    log_fields,
)
from journal_harness import (
    JOURNAL_ON,
    controllers,
    drop_worker_b,
    journal_events,
    reporters,
    route_on_two_homes,
    split,
)
from kubectl_ome_harness import kubectl_ome, plugin_env
from test_rbac import chart_rbac, service_account_token, token_kubeconfig

from ome_routing.cli.controller import LEASE_NAME
from ome_routing_dev.devcluster import LocalControlPlane

__all__ = ["controllers", "plugin_env", "reporters"]  # fixtures

pytestmark = pytest.mark.timeout(120)

#: the note when worker-b's ceiling falls from 2 to 1 (quorum 2): the window holds two or
#: three readings of 1 when the reconcile reads it, as one more poll may have landed
DROP_NOTE = re.compile(
    r"^worker-b weight 2 -> 1: ceiling 2 -> 1 after [23] readings of 1 \(quorum 2\)$"
)


async def test_a_dropped_reading_is_journalled_and_history_prints_it(
    control_plane: LocalControlPlane,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
    plugin_env: dict[str, str],
) -> None:
    process = await drop_worker_b(
        control_plane, namespace, reporters, controllers, tmp_path, JOURNAL_ON
    )
    tmap = await get_map(control_plane, "svc", namespace)
    assert tmap is not None

    async def dropped() -> dict[str, Any] | None:
        for event in await journal_events(control_plane, namespace):
            if event["reason"] == "CeilingChanged" and event["note"].startswith(
                "worker-b weight 2"
            ):
                return event
        return None

    event = await eventually(dropped, what="the Event of worker-b's drop")
    assert DROP_NOTE.match(event["note"]), event["note"]
    assert event["type"] == "Normal"
    assert event["action"] == "UpdateWeight"
    assert event["regarding"] == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "namespace": namespace,
        "name": "svc",
        "uid": tmap["metadata"]["uid"],
    }
    assert event["reportingInstance"].startswith("placement-routing-")
    annotations = event["metadata"]["annotations"]
    assert (
        annotations["routing.ome-routing.io/home"],
        annotations["routing.ome-routing.io/previous-weight"],
        annotations["routing.ome-routing.io/weight"],
    ) == ("worker-b", "2", "1")
    # the first write of the map journals its homes as added
    added = sorted(
        e["note"]
        for e in await journal_events(control_plane, namespace)
        if e["reason"] == "HomeAdded"
    )
    assert [re.sub(r"-> \d+:", "-> N:", note) for note in added] == [
        "worker-a weight none -> N: home added",
        "worker-b weight none -> N: home added",
    ]
    # the same facts in one log line
    fields = next(
        logged
        for logged in log_fields(process.log, "trafficmap entry changed")
        if logged["note"] == event["note"]
    )
    assert fields | {"note": ""} == {
        "trafficmap": f"{namespace}/svc",
        "home": "worker-b",
        "previousWeight": 2,
        "weight": 1,
        "reason": "CeilingChanged",
        "type": "Normal",
        "note": "",
        "event": "created",
    }

    history = await asyncio.to_thread(
        kubectl_ome, control_plane, plugin_env, "traffic", "history", "svc", "-n", namespace
    )
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert lines[0].split() == [
        "TIME",
        "LAST",
        "SEEN",
        "COUNT",
        "TYPE",
        "REASON",
        "HOME",
        "WEIGHT",
        "CAUSE",
    ]
    drop_row = next(row for row in lines if "CeilingChanged" in row and "2 -> 1" in row)
    assert re.search(
        r"\s1\s+Normal\s+CeilingChanged\s+worker-b\s+2 -> 1\s+ceiling 2 -> 1 after [23] readings of 1 \(quorum 2\)$",
        drop_row,
    ), drop_row
    assert lines.index(drop_row) > max(i for i, row in enumerate(lines) if "HomeAdded" in row)

    as_json = await asyncio.to_thread(
        kubectl_ome,
        control_plane,
        plugin_env,
        "traffic",
        "history",
        "svc",
        "-n",
        namespace,
        "-o",
        "json",
    )
    changes = json.loads(as_json.stdout)["changes"]
    assert [c["reason"] for c in changes][:2] == ["HomeAdded", "HomeAdded"]
    assert any(DROP_NOTE.match(c["note"]) for c in changes)

    missing = await asyncio.to_thread(
        kubectl_ome, control_plane, plugin_env, "traffic", "history", "nope", "-n", namespace
    )
    assert missing.returncode == 1
    assert missing.stderr == f"error: get trafficmaps {namespace}/nope: NotFound\n"


async def test_without_the_journal_a_change_writes_no_event(
    control_plane: LocalControlPlane,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
) -> None:
    process = await drop_worker_b(
        control_plane, namespace, reporters, controllers, tmp_path, ROUTING_ON
    )
    # the journal decides and logs in the reconcile that writes the spec, before its status;
    # the weights above were read with that status landed
    assert "trafficmap entry changed" not in process.log
    assert await journal_events(control_plane, namespace) == []


async def test_a_refused_event_is_logged_and_the_weights_still_move(
    control_plane: LocalControlPlane,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
) -> None:
    """The chart's RBAC rendered without `journal.enabled` grants nothing on Events: the
    controller, run as its ServiceAccount with the journal on, is refused every Event."""
    release = f"ome-journal-{uuid.uuid4().hex[:6]}"
    await kubectl(control_plane, "create", "namespace", release)
    rbac = chart_rbac(control_plane, release)
    await kubectl(control_plane, "apply", "-f", "-", input=rbac)
    try:
        token = await service_account_token(control_plane, release)
        config = token_kubeconfig(control_plane, token, tmp_path / "controller.kubeconfig")
        process = await route_on_two_homes(
            control_plane, namespace, reporters, controllers, tmp_path, JOURNAL_ON,
            kubeconfig=config, lease=LEASE_NAME, controller_namespace=release,
        )  # fmt: skip
        reporters["worker-b"].servable = 1
        await eventually(
            lambda: split(control_plane, namespace, {"worker-a": 3, "worker-b": 1}),
            what="weights 3:1 with every Event refused",
        )

        async def refused() -> str | None:
            lines = [
                line
                for line in process.log.splitlines()
                if "journal event not written" in line and "worker-b weight 2 -> 1" in line
            ]
            return lines[0] if lines else None

        line = await eventually(refused, what="the refused Event in the log")
        assert '"error": "403 Forbidden: ' in line, line
        assert await journal_events(control_plane, namespace) == []
    finally:
        for running in controllers:
            await running.stop()  # releases the Lease before its Role goes
        await kubectl(control_plane, "delete", "-f", "-", input=rbac, check=False)
        await kubectl(control_plane, "delete", "namespace", release, "--wait=false", check=False)


async def test_a_repeat_of_an_event_the_api_server_let_go_creates_it_again(
    control_plane: LocalControlPlane,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
) -> None:
    """The drop's Event is deleted (as `--event-ttl` would); the next drop within the
    series window updates a series that is gone (404) and so creates it again, with its
    first time and its count."""
    await drop_worker_b(control_plane, namespace, reporters, controllers, tmp_path, JOURNAL_ON)

    async def drops() -> list[dict[str, Any]] | None:
        found = [
            e for e in await journal_events(control_plane, namespace) if DROP_NOTE.match(e["note"])
        ]
        return found or None

    deleted = await eventually(drops, what="the drop's Event")
    for event in deleted:
        await kubectl(
            control_plane,
            "delete",
            "events.events.k8s.io",
            event["metadata"]["name"],
            "-n",
            namespace,
        )
    deleted_at = max(e["eventTime"] for e in deleted)
    names = {e["metadata"]["name"] for e in deleted}

    async def recreated() -> dict[str, Any] | None:
        for event in await drops() or ():
            again = event["metadata"]["name"] not in names and event["eventTime"] <= deleted_at
            if again and (event.get("series") or {}).get("count", 1) >= 2:
                return event
        return None

    # the note counts 2 or 3 readings: flap until a drop repeats one of the deleted notes
    for _ in range(6):
        reporters["worker-b"].servable = 2
        await eventually(lambda: split(control_plane, namespace, {"worker-a": 3, "worker-b": 2}))
        reporters["worker-b"].servable = 1
        await eventually(lambda: split(control_plane, namespace, {"worker-a": 3, "worker-b": 1}))
        with contextlib.suppress(AssertionError):
            event = await eventually(recreated, timeout=5, what="the drop's Event created again")
            break
    else:
        raise AssertionError(f"no drop's Event created again; now {await drops()}")
    assert event["note"] in {e["note"] for e in deleted}
