"""Faults a control plane meets, made on purpose: a process killed and restarted, a compaction.

For the chaos tests and the reliability figures. `kill(plane, "kube-apiserver")` SIGKILLs
the process (no shutdown of any kind, as an OOM kill or a node loss), `restart(plane, name)`
starts it again with the same flags, ports and data (etcd keeps what it stored), and waits
until it serves again. `compact(plane)` compacts etcd's history up to its current revision
through etcd's own HTTP gateway on loopback, so that any watch resumed from an older
resourceVersion ends with `410 Gone`.

Errors: `ControlPlaneError` when a process does not die, does not come back, or etcd refuses.
"""

from __future__ import annotations

import base64
import json
import signal
import time
import urllib.error
import urllib.request
from typing import Any

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.controlplane import ControlPlaneError, LocalControlPlane

NAMES = ("etcd", "kube-apiserver")


def kill(plane: LocalControlPlane, name: str) -> None:
    """SIGKILL one of the control plane's processes and wait until it is gone."""
    process = _process(plane, name)
    processes._signal_group(process, signal.SIGKILL)
    if not processes._wait_gone(process, plane._children.get(name), 10.0):
        raise ControlPlaneError(f"{name} (pid {process.pid}) survived SIGKILL")


def restart(plane: LocalControlPlane, name: str) -> None:
    """Start a killed process again with its flags and data, and wait until it serves."""
    process = _process(plane, name)
    if process.is_alive():
        raise ControlPlaneError(f"{name} (pid {process.pid}) is still running")
    argv = plane._require("argv")[name]
    child = processes.spawn(name, argv, plane.dir / f"{name}.log", outlive_parent=False)
    plane._children[name] = child
    plane._processes = [p for p in plane._processes if p.name != name]
    plane._processes.append(processes.identify(name, child))
    plane._save_state()
    if name == "etcd":
        _wait_etcd(plane, child, plane._startup_timeout)
    else:
        plane._wait_ready()


def compact(plane: LocalControlPlane) -> int:
    """Compact etcd's history up to its current revision; returns that revision."""
    header = _etcd_call(plane, "/v3/kv/range", {"key": _b64("/"), "limit": 1})["header"]
    revision = int(header["revision"])
    _etcd_call(plane, "/v3/kv/compaction", {"revision": revision, "physical": True})
    return revision


def _process(plane: LocalControlPlane, name: str) -> processes.ProcessId:
    if name not in NAMES:
        raise ControlPlaneError(f"no process {name!r}; one of {', '.join(NAMES)}")
    for process in plane._processes:
        if process.name == name:
            return process
    raise ControlPlaneError(f"the control plane has no {name} process (not started?)")


def _wait_etcd(plane: LocalControlPlane, child: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise ControlPlaneError(
                f"etcd exited with status {child.returncode} on restart:\n"
                f"{processes.tail(plane.dir / 'etcd.log')}"
            )
        try:
            _etcd_call(plane, "/v3/kv/range", {"key": _b64("/"), "limit": 1})
            return
        except (OSError, ControlPlaneError) as error:
            last = str(error)
        time.sleep(0.1)
    raise ControlPlaneError(f"etcd did not serve within {timeout:.0f}s of its restart: {last}")


def _etcd_call(plane: LocalControlPlane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    port = plane.ports["etcd-client"]
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    try:
        with opener.open(request, timeout=5.0) as response:
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise ControlPlaneError(
            f"etcd {path}: {error.code} {error.read().decode(errors='replace')}"
        ) from error
    if "error" in answer:
        raise ControlPlaneError(f"etcd {path}: {answer['error']}")
    return answer


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
