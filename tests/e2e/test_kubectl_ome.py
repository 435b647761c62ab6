"""`kubectl ome placement endpoint` and `traffic drain|undrain` through the real kubectl.

The TrafficMaps are written directly (no controller runs); the drains go to real
InferenceServices, the conflict path included: a pseudo-terminal holds the confirmation
prompt open while the test changes the InferenceService.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubectl_ome_harness import (
    create_isvc,
    create_trafficmap,
    field_values,
    plugin_env,
    run_ome,
)
from lightkube import AsyncClient
from lightkube.types import PatchType

from ome_routing.core.drains import ANNOTATION
from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing.kubectl import actions, drain_checks
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(120)
__all__ = ["plugin_env"]

MAINTENANCE_A = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'
DRAIN_A = (
    "traffic", "drain", "chat", "--workload-cluster", "worker-a",
    "--id", "maintenance-a", "--reason", "planned maintenance",
)  # fmt: skip
NAME = "qwen3-0-6b"
ENTRIES = [
    {
        "cluster": "worker-a",
        "endpoint": "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com/v1",
        "weight": 1,
        "healthy": True,
        "capacity": {"allocated": 1, "ready": 2, "source": "Endpoint", "reported": 1},
    },
    {
        "cluster": "worker-b",
        "endpoint": "http://qwen3-0-6b.qwen3-0-6b.worker-b.example.com/v1",
        "weight": 2,
        "healthy": True,
        "drainRefs": [],
        "capacity": {
            "allocated": 2,
            "ready": 2,
            "source": "ControlPlane",
            "fallbackReason": "capacity endpoint returned HTTP 404",
        },
    },
]


# --- placement endpoint -----------------------------------------------------------------


@pytest.fixture
async def trafficmap(kube_client: AsyncClient, namespace: str) -> str:
    """`qwen3-0-6b` and its own TrafficMap: worker-a capped by its report, worker-b falling back."""
    uid = await create_isvc(kube_client, namespace, NAME)
    await create_trafficmap(kube_client, namespace, NAME, uid, ENTRIES)
    return NAME


async def endpoint(
    plane: LocalControlPlane, env: dict[str, str], namespace: str, *args: str, name: str = NAME
) -> subprocess.CompletedProcess[str]:
    return await run_ome(plane, env, "placement", "endpoint", name, "-n", namespace, *args)


async def test_placement_endpoint_reports_the_services_own_map(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, trafficmap: str
) -> None:
    result = await endpoint(control_plane, plugin_env, namespace)
    assert result.returncode == 0, result.stderr
    table = result.stdout
    assert table.splitlines()[0].split() == ["FIELD", "VALUE"]
    assert field_values(table, "Mode") == ["All (Declared)"]
    assert field_values(table, "Home inspection") == ["Validated 2/2; truncated=false"]
    assert field_values(table, "TrafficMap state") == ["Observed"]
    assert field_values(table, "Routing freshness") == ["Current"]
    assert field_values(table, "Capacity fallback") == [
        "True: EndpointCapacityUnavailable (Current)"
    ]
    assert field_values(table, "Traffic override") == ["False: NoOverrides (Current)"]
    assert field_values(table, "Published") == ["Unknown: NotRecorded (Unverifiable)"]
    assert field_values(table, "Publisher") == ["NoAcknowledgement"]
    assert field_values(table, "Route home") == ["worker-a", "worker-b"]
    assert field_values(table, "Endpoint origin") == [
        "NotRecorded",
        "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com",
        "http://qwen3-0-6b.qwen3-0-6b.worker-b.example.com",
    ]
    assert field_values(table, "Final weight") == ["1; healthy=true", "2; healthy=true"]
    assert field_values(table, "Route evidence") == [
        "drains=0; gate=NotRecorded; fallback=NotRecorded",
        "drains=0; gate=NotRecorded; fallback=HTTPError",
    ]
    assert table.rstrip().endswith(
        "View                 Bounded cells; use -o json for complete identities"
    )
    assert "Capacity proven..." not in table


async def test_placement_endpoint_wide_adds_the_capacity_rows(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, trafficmap: str
) -> None:
    result = await endpoint(control_plane, plugin_env, namespace, "-o", "wide")
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "Capacity proven...") == ["Endpoint", "ControlPlane"]
    assert field_values(result.stdout, "Allocated count") == ["1 (Reported)", "2 (Reported)"]
    assert field_values(result.stdout, "Home cap fallback") == ["NotRecorded", "HTTPError"]


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_placement_endpoint_json_and_yaml_print_omes_report(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    trafficmap: str,
    output: str,
) -> None:
    result = await endpoint(control_plane, plugin_env, namespace, "-o", output)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout) if output == "json" else yaml.safe_load(result.stdout)
    assert (report["apiVersion"], report["kind"]) == (
        "cli.ome.io/v1alpha1",
        "PlacementEndpointReport",
    )
    assert report["metadata"] == {"namespace": namespace, "name": NAME}
    assert [source["kind"] for source in report["sources"]] == ["InferenceService", "TrafficMap"]
    assert report["warnings"] == []
    worker_b = report["content"]["entries"][1]
    assert worker_b["capacity"]["fallbackReason"] == "HTTPError"
    assert report["content"]["issues"] == []
    assert "capacity endpoint returned HTTP 404" not in result.stdout
    assert '/v1"' not in result.stdout and "example.com/v1" not in result.stdout


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
    result = await run_ome(control_plane, env, "placement", "endpoint", trafficmap, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metadata"]["namespace"] == namespace


async def test_placement_endpoint_without_a_map_reports_it_not_found_and_exits_0(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
) -> None:
    await create_isvc(kube_client, namespace, "chat")
    result = await endpoint(control_plane, plugin_env, namespace, name="chat")
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "TrafficMap state") == ["Unavailable"]
    assert field_values(result.stdout, "TrafficMap reason") == ["NotFound"]
    assert field_values(result.stdout, "Routing freshness") == ["Unavailable"]
    assert field_values(result.stdout, "Routable") == ["Unknown: NotRecorded"]


async def test_placement_endpoint_without_the_inferenceservice_exits_1(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str
) -> None:
    result = await endpoint(control_plane, plugin_env, namespace, name="nothing")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "error: InferenceService read unavailable: NotFound\n"


async def test_placement_endpoint_does_not_show_a_map_another_service_owns(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
) -> None:
    await create_isvc(kube_client, namespace, "chat")
    await create_trafficmap(
        kube_client, namespace, "chat", "0b8e9c1a-1111-4000-8000-00000000dead", ENTRIES
    )
    result = await endpoint(control_plane, plugin_env, namespace, name="chat")
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "TrafficMap reason") == ["OwnershipUnbound"]
    assert field_values(result.stdout, "Route home") == []


async def test_placement_endpoint_marks_a_condition_dated_in_the_future_malformed(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    trafficmap: str,
) -> None:
    tmap = await kube_client.get(TrafficMap, trafficmap, namespace=namespace)
    conditions = tmap.to_dict()["status"]["conditions"]
    for condition in conditions:
        if condition["type"] == "OverrideActive":
            condition["lastTransitionTime"] = "2099-01-01T00:00:00Z"
        if condition["type"] == "Routable":
            condition["reason"] = "SomethingNew"
    await kube_client.patch(
        TrafficMap.Status, trafficmap, {"status": {"conditions": conditions}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    result = await endpoint(control_plane, plugin_env, namespace)
    assert result.returncode == 0, result.stderr
    assert field_values(result.stdout, "Traffic override") == [
        "Unknown: MalformedCondition (Invalid)"
    ]
    assert field_values(result.stdout, "Routable") == ["True: OtherReportedReason"]
    assert field_values(result.stdout, "Condition inspect") == [
        "MalformedPayload 3/3; truncated=false"
    ]
    assert field_values(result.stdout, "Issue") == ["TrafficMapConditions: MalformedPayload (1)"]


async def test_placement_endpoint_counts_a_malformed_reason_and_never_prints_it(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    trafficmap: str,
) -> None:
    reason = "capacity endpoint unreachable: private-reporter\nInjected   row"
    await kube_client.patch(
        TrafficMap,
        trafficmap,
        [{"op": "replace", "path": "/spec/entries/1/capacity/fallbackReason", "value": reason}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    outputs = {
        output: await endpoint(control_plane, plugin_env, namespace, "-o", output)
        for output in ("table", "wide", "json", "yaml")
    }
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
    assert report["content"]["issues"] == [
        {"group": "CapacityFallbackReasons", "code": "MalformedPayload", "count": 1}
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("chat", "-o", "xml"),
            "error: unsupported placement output (supported: table, wide, json, yaml)\n",
        ),
        (("Chat_1",), "error: invalid InferenceService name\n"),
        (("chat", "-n", "Bad_NS"), "error: invalid placement namespace\n"),
        (("chat", "--bogus"), "error: unknown flag: --bogus\n"),
        ((), "error: accepts 1 arg(s), received 0\n"),
    ],
)
async def test_placement_endpoint_refuses_bad_arguments(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    args: tuple[str, ...],
    message: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, "placement", "endpoint", *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", message)


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
    (follow_up,) = field_values(drained.stdout, "follow-up")
    assert follow_up.startswith(f"kubectl ome traffic status chat -n {namespace} ")
    assert drained.stderr.endswith(
        "Run the previewed traffic status command to observe controller evidence.\n"
    )
    assert await annotations(kube_client, namespace) == {
        ANNOTATION: MAINTENANCE_A,
        "team": "serving",
    }

    again = await run_ome(control_plane, plugin_env, *DRAIN_A, "-n", namespace, "--yes")
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.strip() == f"error: {actions.ALREADY_EXISTS}"

    undrained = await run_ome(
        control_plane, plugin_env, "traffic", "undrain", "chat", "-n", namespace,
        "--id", "maintenance-a", "--yes", "-o", "json",
    )  # fmt: skip
    assert undrained.returncode == 0, undrained.stderr
    result = json.loads(undrained.stdout)
    assert result["kind"] == "ActionResult"
    assert (result["accepted"], result["applied"]) == (True, True)
    context = yaml.safe_load(control_plane.kubeconfig.read_text())["current-context"]
    assert (
        result["followUp"] == f"kubectl ome traffic status chat -n {namespace} --context={context}"
    )
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
    assert (gone.returncode, gone.stderr.strip()) == (1, f"error: {actions.DOES_NOT_EXIST}")


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
            drain_checks.NEEDS_WORKLOAD_CLUSTER,
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
            drain_checks.BAD_ID,
        ),
        (
            ("traffic", "undrain", "chat", "--id", "maintenance-a", "--reason", "r"),
            drain_checks.INVALID_FLAGS,
        ),
        (("traffic", "undrain", "--id", "maintenance-a"), drain_checks.ONE_SERVICE),
        (
            ("traffic", "undrain", "missing", "--id", "maintenance-a", "--yes"),
            drain_checks.READ_FAILED,
        ),
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
    assert (result.returncode, result.stderr.strip()) == (1, f"error: {drain_checks.MALFORMED}")
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
    assert (code, out) == (drain_checks.EXIT_CONFLICT, "")
    assert err.strip().endswith(
        "error: guarded annotation patch rejected; refresh traffic status and retry explicitly"
    )
    assert (await annotations(kube_client, namespace))[ANNOTATION] == concurrent
