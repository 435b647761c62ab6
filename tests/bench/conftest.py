"""Every benchmark of bench/, once at a tiny size (tests/bench/test_benches_smoke.py).

Every test here is marked `bench`. Before the first, what the benches build or install is
made ready, so that a first build is not cut by a test's timeout: the control plane's
binaries and the Gateway API's CRDs, Debian's nginx-light and wrk (as root; another user
has the tests that need them skip), and the gateways' binaries (as root, who alone runs
them) when a bench that runs the gateways is among the tests to run: `make test` runs that
one (`-k gateway_split`) apart from the others, which need no gateway and so do not wait
for the gateways' build.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.plane_fixtures import prepare_tools
from tests.suite_hooks import Progress, register

from ome_routing_dev.devcluster.debian import install_packages, missing_packages
from ome_routing_dev.devcluster.gateway_tools import ensure_gateway_api_crds
from ome_routing_dev.devcluster.gateways import GATEWAY_NAMES, ensure_gateway_binaries

BENCH_TESTS = Path(__file__).parent
#: Debian's packages of the benches that poll nginx on loopback: {program: package}.
NGINX_AND_WRK = {"nginx": "nginx-light", "wrk": "wrk"}


def _prepare(progress: Progress) -> None:
    prepare_tools(progress)
    ensure_gateway_api_crds(progress=progress)
    if os.geteuid() == 0:
        install_packages(missing_packages(NGINX_AND_WRK), progress, needed_by="the benchmarks")


def _runs_gateways(item: pytest.Item) -> bool:
    """Whether the test runs a bench that runs the gateways (its `Bench.gateways`)."""
    callspec = getattr(item, "callspec", None)
    bench = callspec.params.get("bench") if callspec is not None else None
    return bool(getattr(bench, "gateways", False))


def _prepare_gateways(progress: Progress, selected: Sequence[pytest.Item]) -> None:
    if os.geteuid() == 0 and any(_runs_gateways(item) for item in selected):
        for kind in GATEWAY_NAMES:
            ensure_gateway_binaries(kind, progress=progress)


register(BENCH_TESTS, ["bench"], _prepare, label="bench tools", prepare_selected=_prepare_gateways)
