"""Plain HTTPS calls to a local control plane, for the few things it does without a client.

Readiness, `/version`, and emptying a namespace: the job of kube-controller-manager's
namespace controller, which does not run here. Only ever talks to the control plane's own
loopback URL, never through a proxy.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

# Aggregated discovery: every resource of every group in two requests.
_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


class ApiCallError(RuntimeError):
    """A call answered with an unexpected status; the message carries the server's words."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: {status} {body.strip()}")
        self.status = status


@dataclass(frozen=True)
class Api:
    """The control plane's URL and a TLS context that presents the admin certificate."""

    server_url: str
    context: ssl.SSLContext
    _opener: urllib.request.OpenerDirector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),  # loopback only: never through a proxy
            urllib.request.HTTPSHandler(context=self.context),
        )
        object.__setattr__(self, "_opener", opener)

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        accept: str = "application/json",
        ok: tuple[int, ...] = (200, 201, 202),
        timeout: float = 10.0,
    ) -> tuple[int, str]:
        """(status, body) of one call; raises ApiCallError for a status outside `ok`."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server_url + path, data=data, method=method)
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=timeout) as response:
                status, text = int(response.status), bytes(response.read()).decode()
        except urllib.error.HTTPError as error:
            status, text = int(error.code), bytes(error.read()).decode(errors="replace")
        if status not in ok:
            raise ApiCallError(method, path, status, text)
        return status, text

    def get_json(self, path: str, accept: str = "application/json") -> dict[str, Any]:
        document = json.loads(self.request("GET", path, accept=accept)[1])
        if not isinstance(document, dict):
            raise ApiCallError("GET", path, 200, f"not a JSON object: {document!r}")
        return document

    def namespaced_collections(self) -> list[str]:
        """URL paths (with `{namespace}`) of every namespaced resource that can be emptied."""
        paths: list[str] = []
        for root in ("/api", "/apis"):
            for group in self.get_json(root, accept=_DISCOVERY).get("items", []):
                versions = group.get("versions") or []
                if not versions:
                    continue
                preferred = versions[0]  # the server lists the preferred version first
                name = group.get("metadata", {}).get("name", "")
                prefix = f"/apis/{name}/{preferred['version']}" if name else "/api/v1"
                for resource in preferred.get("resources") or []:
                    verbs = set(resource.get("verbs") or [])
                    if resource.get("scope") == "Namespaced" and "deletecollection" in verbs:
                        paths.append(f"{prefix}/namespaces/{{namespace}}/{resource['resource']}")
        return paths

    def delete_namespace(self, name: str) -> None:
        """Delete every namespaced object in `name`, then the namespace itself, and finalize it."""
        quoted = urllib.parse.quote(name, safe="")
        for collection in self.namespaced_collections():
            self.request("DELETE", collection.format(namespace=quoted), ok=(200, 404, 405))
        namespace = f"/api/v1/namespaces/{quoted}"
        status, _ = self.request("DELETE", namespace, ok=(200, 202, 404, 409))
        if status == 404:
            return
        finalized = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "spec": {},
        }
        self.request("PUT", f"{namespace}/finalize", finalized, ok=(200, 404, 409))
