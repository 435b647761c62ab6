"""Fixtures on a real control plane: etcd + kube-apiserver on loopback, one per test session.

- `control_plane` (session): a started `LocalControlPlane` with the CRDs of `config/crd/`.
- `kubeconfig` (session): its admin kubeconfig.
- `kube_client`: an async lightkube client on that kubeconfig.
- `namespace`: a fresh namespace for one test, deleted with everything in it afterwards.

They are tests/plane_fixtures.py's, shared with the other suites on a control plane.
Every test under tests/e2e is marked `e2e`.
"""

from __future__ import annotations

from pathlib import Path

from tests.plane_fixtures import audit_dir as audit_dir
from tests.plane_fixtures import audit_log as audit_log
from tests.plane_fixtures import control_plane as control_plane
from tests.plane_fixtures import kube_client as kube_client
from tests.plane_fixtures import kubeconfig as kubeconfig
from tests.plane_fixtures import namespace as namespace
from tests.plane_fixtures import prepare_tools
from tests.plane_fixtures import tools as tools
from tests.suite_hooks import register

E2E_DIR = Path(__file__).parent


register(E2E_DIR, ["e2e"], prepare_tools)
