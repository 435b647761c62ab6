"""`kubectl ome` through the real kubectl, on the local control plane.

The plugin is a `kubectl-ome` script on PATH, so `kubectl ome ...` finds it as kubectl
finds any plugin. The TrafficMaps are written directly (no controller runs); the drains
go to real InferenceServices, the conflict path included: a pseudo-terminal holds the
confirmation prompt open while the test changes the InferenceService.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import AsyncClient
from lightkube.types import PatchType

from ome_routing.core.drains import ALREADY_EXISTS, ANNOTATION, DOES_NOT_EXIST
from ome_routing.devcluster import LocalControlPlane
from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing.kubectl import actions

pytestmark = pytest.mark.timeout(120)

MAINTENANCE_A = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'
DRAIN_A = (
    "traffic", "drain", "chat", "--workload-cluster", "worker-a",
    "--id", "maintenance-a", "--reason", "planned maintenance",
)  # fmt: skip


@pytest.fixture(scope="module")
def plugin_env(
    control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The control plane's environment with a `kubectl-ome` script first on PATH."""
    bin_dir = tmp_path_factory.mktemp("plugin-bin")
    script = bin_dir / "kubectl-ome"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ome_routing.cli.kubectl_ome "$@"\n')
    script.chmod(0o755)
    env = control_plane.env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def kubectl_ome(
    plane: LocalControlPlane,
    env: dict[str, str],
    *args: str,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(plane.tools.kubectl), "ome", *args],
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def run_ome(
    plane: LocalControlPlane, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl_ome, plane, env, *args)


def field_values(table: str, field: str) -> list[str]:
    """The VALUE cells of every row named `field` in a FIELD/VALUE table."""
    lines = table.splitlines()
    column = lines[0].index("VALUE")
    return [line[column:] for line in lines[1:] if line[:column].rstrip() == field]


# --- placement endpoint -----------------------------------------------------------------


def a_trafficmap_status(generation: int) -> dict[str, Any]:
    def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": "2026-09-28T10:00:00Z",
        }

    return {
        "conditions": [
            condition("Routable", "True", "Routable", "2 of 2 home(s) have a positive weight"),
            condition("OverrideActive", "False", "NoOverrides", "the service has no drains"),
            condition(
                "CapacityFallback",
                "True",
                "EndpointCapacityUnavailable",
                "1 of 2 home(s) are using control-plane capacity; "
                "inspect spec.entries[].capacity.fallbackReason",
            ),
        ]
    }


@pytest.fixture
async def trafficmap(kube_client: AsyncClient, namespace: str) -> AsyncIterator[str]:
    """The TrafficMap `qwen3-0-6b`: worker-a capped by its report, worker-b falling back."""
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "qwen3-0-6b", "namespace": namespace},
        "spec": {
            "service": "qwen3-0-6b",
            "mode": "All",
            "observedISVCGeneration": 1,
            "entries": [
                {
                    "cluster": "worker-a",
                    "endpoint": "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com",
                    "weight": 1,
                    "healthy": True,
                    "capacity": {"allocated": 1, "ready": 2, "source": "Endpoint", "reported": 1},
                },
                {
                    "cluster": "worker-b",
                    "endpoint": "http://qwen3-0-6b.qwen3-0-6b.worker-b.example.com",
                    "weight": 2,
                    "healthy": True,
                    "capacity": {
                        "allocated": 2,
                        "ready": 2,
                        "source": "ControlPlane",
                        "fallbackReason": "capacity endpoint returned HTTP 404",
                    },
                },
            ],
        },
    }
    created = await kube_client.create(TrafficMap.from_dict(body))
    generation = created.metadata.generation
    await kube_client.patch(
        TrafficMap.Status,
        "qwen3-0-6b",
        {"status": a_trafficmap_status(generation)},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    yield "qwen3-0-6b"


async def test_placement_endpoint_shows_conditions_and_each_home(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, trafficmap: str
) -> None:
    result = await run_ome(
        control_plane, plugin_env, "placement", "endpoint", trafficmap, "-n", namespace
    )
    assert result.returncode == 0, result.stderr
    table = result.stdout
    assert table.splitlines()[0].split() == ["FIELD", "VALUE"]
    assert field_values(table, "Capacity fallback") == [
        "True: EndpointCapacityUnavailable (Current)"
    ]
    assert field_values(table, "Traffic override") == ["False: NoOverrides (Current)"]
    assert field_values(table, "Published") == ["Unknown: NotRecorded (Unverifiable)"]
    assert field_values(table, "Route home") == ["worker-a", "worker-b"]
    assert field_values(table, "Final weight") == ["1; healthy=true", "2; healthy=true"]
    assert field_values(table, "Route evidence") == [
        "drains=0; gate=NotRecorded; fallback=NotRecorded",
        "drains=0; gate=NotRecorded; fallback=HTTPError",
    ]
    assert "Capacity proven..." not in table


async def test_placement_endpoint_wide_adds_the_capacity_rows(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, trafficmap: str
) -> None:
    result = await run_ome(
        control_plane,
        plugin_env,
        "placement",
        "endpoint",
        trafficmap,
        "-n",
        namespace,
        "-o",
        "wide",
    )
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "Capacity proven...") == ["Endpoint", "ControlPlane"]
    assert field_values(result.stdout, "Allocated count") == ["1 (Reported)", "2 (Reported)"]
    assert field_values(result.stdout, "Reported capacity") == ["1", "NotRecorded"]


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_placement_endpoint_json_and_yaml_print_the_whole_report(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    trafficmap: str,
    output: str,
) -> None:
    result = await run_ome(
        control_plane,
        plugin_env,
        "placement",
        "endpoint",
        trafficmap,
        "-n",
        namespace,
        "-o",
        output,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout) if output == "json" else yaml.safe_load(result.stdout)
    assert report["kind"] == "PlacementEndpointReport"
    assert report["trafficMap"]["namespace"] == namespace
    worker_b = report["homes"][1]
    assert worker_b["capacity"]["fallbackReason"] == "HTTPError"
    assert report["issues"] == []
    assert "capacity endpoint returned HTTP 404" not in result.stdout


async def test_placement_endpoint_takes_the_namespace_of_the_kubeconfig_context(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    trafficmap: str,
    tmp_path: Path,
) -> None:
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    env = {**plugin_env, "KUBECONFIG": str(kubeconfig)}
    result = await run_ome(control_plane, env, "placement", "endpoint", trafficmap)
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "TrafficMap") == [f"{namespace}/{trafficmap}"]


async def test_placement_endpoint_without_a_map_is_an_error(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str
) -> None:
    result = await run_ome(
        control_plane, plugin_env, "placement", "endpoint", "nothing", "-n", namespace
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f'error: TrafficMap "{namespace}/nothing" not found')


async def test_placement_endpoint_counts_a_malformed_reason_as_an_issue_and_never_prints_it(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    trafficmap: str,
) -> None:
    """A reason with a control character is `MalformedPayload`, in OME's issue row too."""
    reason = "capacity endpoint unreachable: private-reporter\nInjected   row"
    await kube_client.patch(
        TrafficMap,
        trafficmap,
        [{"op": "replace", "path": "/spec/entries/1/capacity/fallbackReason", "value": reason}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    outputs = {
        output: await run_ome(
            control_plane, plugin_env, "placement", "endpoint", trafficmap, "-n", namespace,
            "-o", output,
        )
        for output in ("table", "wide", "json", "yaml")
    }  # fmt: skip
    for output, result in outputs.items():
        assert result.returncode == 0, result.stderr
        assert "private-reporter" not in result.stdout, output
    table = outputs["table"].stdout
    assert (
        field_values(table, "Route evidence")[1]
        == "drains=0; gate=NotRecorded; fallback=MalformedPayload"
    )
    assert field_values(table, "Issue") == ["CapacityFallbackReasons: MalformedPayload (1)"]
    report = json.loads(outputs["json"].stdout)
    assert report["issues"] == [
        {"group": "CapacityFallbackReasons", "code": "MalformedPayload", "count": 1}
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("-o", "xml"),
            'error: unsupported output format "xml" (supported: table, wide, json, yaml)',
        ),
        (("--bogus",), "error: No such option"),
    ],
)
async def test_placement_endpoint_refuses_bad_flags(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    args: tuple[str, ...],
    message: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, "placement", "endpoint", "chat", *args)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1


# --- traffic drain and undrain ----------------------------------------------------------


@pytest.fixture
async def chat(kube_client: AsyncClient, namespace: str) -> str:
    """The InferenceService `chat`, placed on worker-a and worker-b, with another annotation."""
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace, "annotations": {"team": "serving"}},
        "spec": {
            "model": {"name": "chat"},
            "placement": {
                "policy": "ClusterAffinity",
                "mode": "All",
                "clusterAffinity": [
                    {
                        "matchFields": [
                            {
                                "key": "metadata.name",
                                "operator": "In",
                                "values": ["worker-a", "worker-b"],
                            }
                        ]
                    }
                ],
            },
        },
    }
    await kube_client.create(InferenceService.from_dict(body))
    return "chat"


async def annotations(kube_client: AsyncClient, namespace: str) -> dict[str, str]:
    isvc = await kube_client.get(InferenceService, "chat", namespace=namespace)
    return dict(isvc.metadata.annotations or {})


async def test_drain_then_undrain_round_trip(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    drained = await run_ome(control_plane, plugin_env, *DRAIN_A, "-n", namespace, "--yes")
    assert drained.returncode == 0, drained.stderr
    assert drained.stderr.startswith(actions.PREVIEW_TITLE)
    assert field_values(drained.stderr.split("\n", 1)[1], "Override count") == ["0 -> 1"]
    assert field_values(drained.stdout, "applied") == ["Yes"]
    assert field_values(drained.stdout, "overrides") == ["0 -> 1"]
    assert await annotations(kube_client, namespace) == {
        ANNOTATION: MAINTENANCE_A,
        "team": "serving",
    }

    again = await run_ome(control_plane, plugin_env, *DRAIN_A, "-n", namespace, "--yes")
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.strip() == f"error: {ALREADY_EXISTS}"

    undrained = await run_ome(
        control_plane, plugin_env, "traffic", "undrain", "chat", "-n", namespace,
        "--id", "maintenance-a", "--yes", "-o", "json",
    )  # fmt: skip
    assert undrained.returncode == 0, undrained.stderr
    result = json.loads(undrained.stdout)
    assert result["kind"] == "ActionResult"
    assert (result["accepted"], result["applied"]) == (True, True)
    assert result["traffic"] == {
        "overrideID": "maintenance-a",
        "cluster": "worker-a",
        "overridesBefore": 1,
        "overridesAfter": 0,
    }
    assert await annotations(kube_client, namespace) == {"team": "serving"}

    gone = await run_ome(
        control_plane,
        plugin_env,
        "traffic",
        "undrain",
        "chat",
        "-n",
        namespace,
        "--id",
        "maintenance-a",
        "--yes",
    )
    assert (gone.returncode, gone.stderr.strip()) == (1, f"error: {DOES_NOT_EXIST}")


@pytest.mark.parametrize(("dry_run", "accepted"), [("server", "Yes"), ("client", "No")])
async def test_a_dry_run_stores_nothing(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
    dry_run: str,
    accepted: str,
) -> None:
    result = await run_ome(
        control_plane, plugin_env, *DRAIN_A, "-n", namespace, f"--dry-run={dry_run}", "--yes"
    )
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "accepted") == [accepted]
    assert field_values(result.stdout, "applied") == ["No"]
    assert ANNOTATION not in await annotations(kube_client, namespace)


async def test_without_yes_and_without_a_terminal_nothing_is_sent(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, *DRAIN_A, "-n", namespace)
    assert (result.returncode, result.stdout) == (1, "")
    assert "Override ID       maintenance-a" in result.stderr  # the preview still prints
    assert result.stderr.strip().endswith(f"error: {actions.NOT_CONFIRMED}")
    assert ANNOTATION not in await annotations(kube_client, namespace)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("traffic", "drain", "chat", "--id", "maintenance-a", "--reason", "r"),
            actions.NEEDS_WORKLOAD_CLUSTER,
        ),
        (
            (
                "traffic",
                "drain",
                "chat",
                "--workload-cluster",
                "worker-a",
                "--id",
                "Bad_ID",
                "--reason",
                "r",
            ),
            actions.BAD_ID,
        ),
        (
            ("traffic", "undrain", "chat", "--id", "maintenance-a", "--reason", "r"),
            actions.INVALID_FLAGS,
        ),
        (("traffic", "undrain", "--id", "maintenance-a"), actions.ONE_SERVICE),
        (("traffic", "undrain", "missing", "--id", "maintenance-a", "--yes"), actions.READ_FAILED),
    ],
)
async def test_refusals_exit_1_with_their_message(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    args: tuple[str, ...],
    message: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, *args, "-n", namespace)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.strip() == f"error: {message}"


async def test_a_malformed_annotation_is_refused_and_kept(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    await kube_client.patch(
        InferenceService, "chat", {"metadata": {"annotations": {ANNOTATION: "{oops"}}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    result = await run_ome(control_plane, plugin_env, *DRAIN_A, "-n", namespace, "--yes")
    assert (result.returncode, result.stderr.strip()) == (1, f"error: {actions.MALFORMED}")
    assert (await annotations(kube_client, namespace))[ANNOTATION] == "{oops"


# --- the interactive prompt, and a change while it waits ---------------------------------


class Prompted:
    """`kubectl ome` with a pseudo-terminal on stdin, stopped at its confirmation prompt."""

    def __init__(self, plane: LocalControlPlane, env: dict[str, str], *args: str) -> None:
        self._master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [str(plane.tools.kubectl), "ome", *args],
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        self.stderr = b""

    def wait_for_prompt(self, timeout: float = 30.0) -> None:
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        prompt = actions.PROMPT.rstrip().encode()
        while prompt not in self.stderr:
            left = deadline - time.monotonic()
            assert left > 0, f"no prompt; stderr so far: {self.stderr.decode()}"
            ready, _, _ = select.select([self.process.stderr], [], [], left)
            if ready:
                chunk = os.read(self.process.stderr.fileno(), 4096)
                assert chunk, f"stderr closed before the prompt: {self.stderr.decode()}"
                self.stderr += chunk

    def answer(self, text: str) -> tuple[int, str, str]:
        os.write(self._master, text.encode())
        out, err = self.process.communicate(timeout=60)
        os.close(self._master)
        return self.process.returncode, out.decode(), (self.stderr + err).decode()


async def test_answering_yes_at_the_prompt_applies_the_drain(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    prompted = Prompted(control_plane, plugin_env, *DRAIN_A, "-n", namespace)
    await asyncio.to_thread(prompted.wait_for_prompt)
    code, out, err = await asyncio.to_thread(prompted.answer, "y\n")
    assert code == 0, err
    assert field_values(out, "applied") == ["Yes"]
    assert (await annotations(kube_client, namespace))[ANNOTATION] == MAINTENANCE_A


async def test_answering_no_sends_nothing(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    prompted = Prompted(control_plane, plugin_env, *DRAIN_A, "-n", namespace)
    await asyncio.to_thread(prompted.wait_for_prompt)
    code, out, err = await asyncio.to_thread(prompted.answer, "n\n")
    assert (code, out) == (1, "")
    assert err.strip().endswith(f"error: {actions.NOT_CONFIRMED}")
    assert ANNOTATION not in await annotations(kube_client, namespace)


async def test_a_change_between_read_and_patch_is_a_conflict_with_exit_code_3(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    """Someone drains worker-b while the prompt waits: the guarded patch must not overwrite it."""
    prompted = Prompted(control_plane, plugin_env, *DRAIN_A, "-n", namespace)
    await asyncio.to_thread(prompted.wait_for_prompt)
    concurrent = '{"rack-b":{"cluster":"worker-b","reason":"rack swap"}}'
    await kube_client.patch(
        InferenceService, "chat", {"metadata": {"annotations": {ANNOTATION: concurrent}}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    code, out, err = await asyncio.to_thread(prompted.answer, "yes\n")
    assert (code, out) == (actions.EXIT_CONFLICT, "")
    assert err.strip().endswith(
        "error: guarded annotation patch rejected; refresh traffic status and retry explicitly"
    )
    assert (await annotations(kube_client, namespace))[ANNOTATION] == concurrent
