"""`ome-routing demo`, run for real: it prints the specification's outputs and leaves nothing behind."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ome_routing_dev.demo.spec import (
    CONDITION_AVAILABLE,
    CONDITION_FALLBACK,
    ENTRIES,
    FALLBACK_REASONS,
    Match,
    SpecCommand,
    output_matches,
)
from ome_routing_dev.devcluster import Tools

REPO = Path(__file__).resolve().parents[2]
OME_ROUTING = Path(sys.executable).parent / "ome-routing"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

# The specification's output blocks, word for word.
SPEC_OUTPUTS = {
    "Step 3 condition": [
        "FALLBACK   REASON                      MESSAGE",
        "False      EndpointCapacityAvailable   endpoint capacity is available for all 2 home(s)",
    ],
    "Step 3 entries": ["worker-a 2 2 2 ControlPlane 3", "worker-b 1 1 2 Endpoint 1"],
    "fallback reasons": ["worker-a:", "worker-b: capacity endpoint returned HTTP 404"],
}
FALLBACK_MESSAGE = (
    "1 of 2 home(s) are using control-plane capacity; "
    "inspect spec.entries[].capacity.fallbackReason"
)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that contain `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(cmdline)
    return found


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def contains_block(output: str, block: list[str]) -> bool:
    """Whether `block` appears as consecutive lines of `output`, trailing blanks aside."""
    lines = [line.rstrip() for line in output.splitlines()]
    return any(lines[i : i + len(block)] == block for i in range(len(lines)))


@pytest.fixture(scope="module")
def demo_run(tools: Tools) -> subprocess.CompletedProcess[str]:
    """One run of `ome-routing demo` (about a minute); `tools` builds the binaries first, visibly."""
    result = subprocess.run(
        [str(OME_ROUTING), "demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    # Styles, should the environment force them (FORCE_COLOR), are not part of the output.
    result.stdout = ANSI_ESCAPE.sub("", result.stdout)
    return result


def test_demo_exits_zero_and_says_every_output_matches(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    assert demo_run.returncode == 0, demo_run.stdout + demo_run.stderr
    assert "DIFFERS" not in demo_run.stdout
    assert demo_run.stdout.count("OK: matches the specification") == 5
    assert "Every output matches the specification." in demo_run.stdout


@pytest.mark.parametrize("block", SPEC_OUTPUTS.values(), ids=SPEC_OUTPUTS.keys())
def test_demo_prints_the_specifications_output(
    demo_run: subprocess.CompletedProcess[str], block: list[str]
) -> None:
    assert contains_block(demo_run.stdout, block), demo_run.stdout


def test_demo_prints_the_fallback_condition_and_gauge(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    row = re.search(r"^True +EndpointCapacityUnavailable +(.*)$", demo_run.stdout, re.MULTILINE)
    assert row is not None, demo_run.stdout
    assert row.group(1).rstrip() == FALLBACK_MESSAGE
    gauge = (
        'ome_trafficmap_capacity_fallback_homes{namespace="qwen3-0-6b",trafficmap="qwen3-0-6b"} 1.0'
    )
    assert gauge in demo_run.stdout.splitlines()


def test_demo_leaves_no_process_port_or_directory_behind(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    work = re.search(r"log in (/\S+)/controller\.log", demo_run.stdout)
    assert work is not None, demo_run.stdout
    ports = [int(p) for p in re.findall(r"https?://127\.0\.0\.1:(\d+)[/,]", demo_run.stdout)]
    assert len(set(ports)) >= 4  # kube-apiserver, two reporters, the controller's metrics

    assert processes_mentioning(work.group(1)) == []
    assert [port for port in set(ports) if listening(port)] == []
    assert not Path(work.group(1)).exists()


# -- the comparison the demo's exit status rests on ---------------------------------------------


@pytest.mark.parametrize(
    ("command", "printed"),
    [
        (
            CONDITION_AVAILABLE,
            "FALLBACK   REASON   MESSAGE\nTrue   EndpointCapacityUnavailable   x\n",
        ),
        (ENTRIES, "worker-a 2 2 2 ControlPlane 3\nworker-b 2 2 2 ControlPlane 3\n"),
        (ENTRIES, "worker-a 2 2 2 ControlPlane 3\n"),
        (FALLBACK_REASONS, "worker-a: \nworker-b: capacity endpoint returned HTTP 503\n"),
        (
            CONDITION_FALLBACK,
            f"FALLBACK REASON MESSAGE\nTrue EndpointCapacityUnavailable 2{FALLBACK_MESSAGE[1:]}\n",
        ),
    ],
)
def test_an_output_that_differs_from_the_specification_is_reported(
    command: SpecCommand, printed: str
) -> None:
    assert not command.matches(printed)


def test_trailing_blanks_and_column_widths_do_not_count_as_differences() -> None:
    assert FALLBACK_REASONS.matches("worker-a: \nworker-b: capacity endpoint returned HTTP 404\n")
    assert output_matches(
        "FALLBACK   REASON                        MESSAGE\n"
        f"True       EndpointCapacityUnavailable   {FALLBACK_MESSAGE}\n",
        CONDITION_FALLBACK.expected,
        Match.CELLS,
    )


def test_demo_shows_a_home_gated_by_its_probe_and_let_back_in(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    """The probe steps follow the capacity steps: worker-b is gated, then reopened."""
    out = demo_run.stdout
    gated = ["worker-a 1 true Passing HTTP 200", "worker-b 0 false Failing HTTP 503"]
    reopened = ["worker-a 1 true Passing HTTP 200", "worker-b 1 true Passing HTTP 200"]
    assert contains_block(out, gated), out
    assert "worker-b: gated=true consecutiveFailures=3" in out.splitlines()
    assert contains_block(out[out.index("Bring worker-b's health answer back") :], reopened)
    assert out.index("Read the gauge") < out.index("Probe each home's model server")
