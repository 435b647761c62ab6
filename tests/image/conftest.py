"""Fixtures for the controller image: built once per session, through the project's own
entry point (`build_image`, what `make image` runs), then run with crun.

- `image` (session): the built image (a cache hit when `make image` already built it).
- `bundle` (session): it unpacked as an OCI runtime bundle, shared read-only.
- `chart_pod` (session): the chart's pod settings (user, security context, emptyDirs).
- `control_plane` (session): the local control plane with the CRDs (tests/plane_fixtures.py's,
  as in tests/e2e).

Every test here is marked `image` and `e2e`. The build needs root (as CI has) and installs
mmdebstrap, umoci, skopeo and crun with apt-get when they are missing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from container import PodSettings, ensure_crun, unpack
from tests.plane_fixtures import audit_dir as audit_dir
from tests.plane_fixtures import control_plane as control_plane
from tests.plane_fixtures import prepare_tools
from tests.plane_fixtures import tools as tools
from tests.suite_hooks import Progress, register

from ome_routing_dev.devcluster import Tools
from ome_routing_dev.devcluster.image import Image, build_image

IMAGE_DIR = Path(__file__).parent
REPO = IMAGE_DIR.parents[1]


def _prepare(progress: Progress) -> None:
    """The control plane's binaries, the image, and crun: a first build of the image takes
    minutes."""
    prepare_tools(progress)
    build_image(REPO, progress=progress)
    ensure_crun()


register(IMAGE_DIR, ["image", "e2e"], _prepare, label="image")


@pytest.fixture(scope="session")
def image() -> Image:
    """The image of this checkout (built before the session by pytest_collection_finish)."""
    return build_image(REPO)


@pytest.fixture(scope="session")
def bundle(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image unpacked once; every container mounts its root filesystem read-only."""
    return unpack(image.layout, image.tag, tmp_path_factory.mktemp("image") / "bundle")


@pytest.fixture(scope="session")
def chart_pod(tools: Tools) -> PodSettings:
    """How the chart, with its default values, runs the image (helm template)."""
    result = subprocess.run(
        [str(tools.helm), "template", "ome", str(REPO / "charts" / "ome-resources")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    (deployment,) = [doc for doc in docs if doc["kind"] == "Deployment"]
    return PodSettings.of(deployment["spec"]["template"]["spec"])
