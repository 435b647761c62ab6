"""Which of a role's grants were used: kube-apiserver's audit log of ServiceAccount requests.

The local control plane of the suites records every request a ServiceAccount makes
(`flags`: level Metadata, only the group `system:serviceaccounts`, so that the admin's
own requests cost nothing). `granted` reads the rules of the Roles and ClusterRoles of a
rendered chart, `exercised` the requests one ServiceAccount made, and `unexercised` what
the first grants that the second never used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""

#: one grant or one request: (API group, resource[/subresource], verb)
Grant = tuple[str, str, str]


def flags(directory: Path) -> tuple[str, ...]:
    """kube-apiserver flags that write ServiceAccounts' requests to `log_path(directory)`."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(POLICY)
    return (f"--audit-policy-file={policy}", f"--audit-log-path={log_path(directory)}")


def log_path(directory: Path) -> Path:
    return directory / "audit.log"


def granted(rendered: str) -> set[Grant]:
    """Every (group, resource, verb) the Roles and ClusterRoles of `rendered` grant."""
    grants: set[Grant] = set()
    for doc in yaml.safe_load_all(rendered):
        if not doc or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in doc.get("rules") or ():
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    grants.update((group, resource, verb) for verb in rule.get("verbs") or ())
    return grants


def exercised(audit_log: Path, username: str) -> set[Grant]:
    """Every (group, resource, verb) that `username` asked the API server for."""
    used: set[Grant] = set()
    for event in _events(audit_log):
        ref: dict[str, Any] = event.get("objectRef") or {}
        if event.get("user", {}).get("username") != username or not ref.get("resource"):
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup") or "", resource, event["verb"]))
    return used


def unexercised(
    grants: Iterable[Grant], used: Iterable[Grant], reasoned: dict[Grant, str]
) -> list[str]:
    """The grants never used and not in the reviewed list `reasoned`, as `verb resource`."""
    left = set(grants) - set(used) - set(reasoned)
    return sorted(
        f"{verb} {resource}" + (f".{group}" if group else "") for group, resource, verb in left
    )


def _events(audit_log: Path) -> Iterable[dict[str, Any]]:
    if not audit_log.exists():
        return
    for line in audit_log.read_text().splitlines():
        if line.strip():
            yield json.loads(line)
