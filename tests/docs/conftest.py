"""The docs suite: README.md and docs/**/*.md checked against the project (tests/docs).

Every fenced shell block (```bash, ```sh, ```shell, ```console) carries one marker on the
line right before its fence:

- `<!-- doc-test: run -->`: run as a bash script (`set -euo pipefail`) from the repository's
  root, with the virtualenv's bin first on PATH and no KUBECONFIG; it must exit 0 within
  120 s (what it leaves running is ended). A console block runs its `$ ` lines only.
- `<!-- doc-test: run control-plane -->`: the same, with KUBECONFIG of a local control plane
  (etcd and kube-apiserver with the CRDs of config/crd/) and kubectl and helm on PATH; the
  block cleans up after itself or works in a namespace of its own. These run in
  `control_plane/`, marked `e2e` too.
- `<!-- doc-test: illustration -->`: not run (root, minutes, a real cluster, or output).

Also checked: relative links and their anchors (GitHub's slugs), http(s) links for form;
every `ome-routing ...` and `kubectl ome ...` in inline code or a shell block against the
CLI's own commands and flags; every `ome_[a-z_]+` metric name against the controller's and
the reporter's registries. Every test here is marked `docs`. The reader and the checks
have unit tests of their own, over the Markdown of `fixtures/`.

- `block_env` (session): a `run` block's environment (`doc_checks.block_environment`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from doc_checks import block_environment
from tests.suite_hooks import register

DOCS_DIR = Path(__file__).parent

register(DOCS_DIR, ["docs"], lambda progress: None, label="docs")


@pytest.fixture(scope="session")
def block_env() -> dict[str, str]:
    return block_environment(os.environ)
