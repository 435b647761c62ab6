"""Run the controller image with crun, as a kubelet would run the chart's pod.

`umoci unpack` turns the image into an OCI runtime bundle (root filesystem + config.json with
the image's user, entrypoint and environment); `Container` then changes only what the chart's
pod spec (`PodSettings.of` the chart's rendered Deployment) and the test need: the user,
a read-only root filesystem, no capabilities, the arguments, read-only bind mounts for
files, a tmpfs where the pod has an emptyDir, and the host's network namespace so that the
process reaches the control plane and the reporters on loopback.

crun runs inside a private mount namespace (`unshare -m`) with the cgroup v2 hierarchy
`/sys/fs/cgroup/unified` unmounted: on these hybrid-cgroup machines crun otherwise fails
to place the container in a cgroup ("cgroups in hybrid mode not supported, drop all
controllers from cgroupv2").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_RUNTIME = (
    "umount /sys/fs/cgroup/unified 2>/dev/null || true; "
    'exec crun run --no-new-keyring --bundle "$1" "$2"'
)


def ensure_crun() -> str:
    """crun's path, installing Debian's package when it is missing."""
    if shutil.which("crun") is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "crun"]
        if subprocess.run(install, capture_output=True, env=env, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=True)
            subprocess.run(install, capture_output=True, env=env, check=True)
    found = shutil.which("crun")
    assert found is not None, "crun is not on PATH after apt-get install crun"
    return found


def unpack(layout: Path, tag: str, bundle: Path) -> Path:
    """The image as an OCI runtime bundle in `bundle` (which must not exist)."""
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)],
        check=True,
        capture_output=True,
    )
    return bundle


@dataclass(frozen=True)
class PodSettings:
    """What a pod spec changes about how the image runs. The defaults are the image's own
    user, and a locked-down container: read-only root, no capabilities, no new privileges."""

    user: tuple[int, int] | None = None
    read_only_root: bool = True
    drop_all_capabilities: bool = True
    no_new_privileges: bool = True
    empty_dirs: tuple[str, ...] = ()

    @classmethod
    def of(cls, pod_spec: dict[str, Any]) -> PodSettings:
        """The settings of a rendered pod spec's first container, as a kubelet applies them."""
        container = pod_spec["containers"][0]
        pod_security = pod_spec.get("securityContext", {})
        security = {**pod_security, **container.get("securityContext", {})}
        user = security.get("runAsUser")
        group = security.get("runAsGroup", user)
        empty_dirs = {v["name"] for v in pod_spec.get("volumes", []) if "emptyDir" in v}
        return cls(
            user=(user, group) if user is not None else None,
            read_only_root=bool(security.get("readOnlyRootFilesystem", False)),
            drop_all_capabilities="ALL" in security.get("capabilities", {}).get("drop", []),
            no_new_privileges=security.get("allowPrivilegeEscalation") is False,
            empty_dirs=tuple(
                m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] in empty_dirs
            ),
        )


class Container:
    """One run of the unpacked image: `run()` to completion, or `start()` in the background.

    Each run has its own bundle folder beside the unpacked one, with its own config.json
    and the shared root filesystem (never written to: it is mounted read-only).
    """

    def __init__(
        self,
        bundle: Path,
        args: list[str],
        mounts: dict[str, Path] | None = None,
        *,
        pod: PodSettings | None = None,
    ) -> None:
        self.id = f"ome-routing-test-{uuid.uuid4().hex[:12]}"
        self.bundle = bundle.parent / self.id
        self.bundle.mkdir()
        self.process: subprocess.Popen[bytes] | None = None
        config = json.loads((bundle / "config.json").read_text())
        config["root"]["path"] = str(bundle / config["root"]["path"])
        process = config["process"]
        process["terminal"] = False
        if args:
            process["args"] = args
        pod = pod or PodSettings()
        if pod.user is not None:
            process["user"] = {"uid": pod.user[0], "gid": pod.user[1]}
        if pod.drop_all_capabilities:
            process["capabilities"] = {kind: [] for kind in process["capabilities"]}
        process["noNewPrivileges"] = pod.no_new_privileges
        config["root"]["readonly"] = pod.read_only_root
        linux = config["linux"]
        linux["namespaces"] = [ns for ns in linux["namespaces"] if ns["type"] != "network"]
        for destination, source in (mounts or {}).items():
            config["mounts"].append(
                {
                    "destination": destination,
                    "type": "bind",
                    "source": str(source),
                    "options": ["rbind", "ro"],
                }
            )
        for destination in pod.empty_dirs:
            config["mounts"].append(
                {
                    "destination": destination,
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": ["nosuid", "nodev", "mode=1777", "size=16m"],
                }
            )
        (self.bundle / "config.json").write_text(json.dumps(config, indent=2))

    def _command(self) -> list[str]:
        unshare = ["unshare", "--mount", "--propagation=private"]
        return [*unshare, "sh", "-c", _RUNTIME, "sh", str(self.bundle), self.id]

    def run(self, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._command(), capture_output=True, text=True, timeout=timeout, check=False
        )

    def start(self, log: Path) -> Container:
        with log.open("ab") as sink:
            self.process = subprocess.Popen(self._command(), stdout=sink, stderr=subprocess.STDOUT)
        return self

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM to the container's process (as the kubelet sends), then clean up."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            subprocess.run(["crun", "kill", self.id, "TERM"], capture_output=True, check=False)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                subprocess.run(["crun", "kill", self.id, "KILL"], capture_output=True, check=False)
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(10)
        subprocess.run(["crun", "delete", "--force", self.id], capture_output=True, check=False)
        return self.process.returncode
