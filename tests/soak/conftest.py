"""The soak suite: long runs on the local control plane, each stated bound checked at the end.

Every test here is marked `soak`; each runs for minutes (a flapping home for 5 minutes),
so the suite is its own CI step. The fixtures are tests/plane_fixtures.py's, as in
tests/e2e: one control plane for the session, a fresh namespace for each test.
"""

from __future__ import annotations

from pathlib import Path

from tests.plane_fixtures import audit_dir as audit_dir
from tests.plane_fixtures import control_plane as control_plane
from tests.plane_fixtures import kube_client as kube_client
from tests.plane_fixtures import kubeconfig as kubeconfig
from tests.plane_fixtures import namespace as namespace
from tests.plane_fixtures import prepare_tools
from tests.plane_fixtures import tools as tools
from tests.suite_hooks import register

SOAK_DIR = Path(__file__).parent

register(SOAK_DIR, ["soak"], prepare_tools)
