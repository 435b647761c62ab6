"""The Kubernetes API as `kubectl ome` uses it: the kubeconfig's context, and raw requests.

`Api` loads one kubeconfig context (the `--kubeconfig` / `--context` / `-n` flags) and
sends requests as the API server takes them, returning the JSON it answered, so the
plugin sees every field as stored. Each request has its own timeout (10 s at most) and
no retry; redirects are not followed, and a body larger than 1 MiB is refused.

Failures are `ApiFailure` with a `reason` in OME's words (`NotFound`, `Forbidden`,
`Timeout`, `Cancelled`, `UnsupportedAPI`, `Unreadable`) and the API server's `Status`
when it sent one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["REQUEST_TIMEOUT", "Api", "ApiFailure", "KubeconfigError"]

#: The longest one request may take, in seconds.
REQUEST_TIMEOUT = 10.0
RESPONSE_LIMIT = 1024 * 1024
GROUP_VERSION = "/apis/ome.io/v1beta1"


class KubeconfigError(Exception):
    """The kubeconfig cannot be loaded, or has no usable context."""


class ApiFailure(Exception):
    """A request that did not succeed."""

    def __init__(self, reason: str, status: Mapping[str, Any] | None = None, code: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status: Mapping[str, Any] = status or {}
        self.code = code

    @property
    def message(self) -> str:
        return str(self.status.get("message") or self.reason)

    @property
    def named(self) -> bool:
        """Whether a 404 names the object (else the API itself is missing)."""
        details = self.status.get("details")
        return isinstance(details, Mapping) and bool(details.get("name"))


def _reason(code: int) -> str:
    return {403: "Forbidden", 404: "NotFound", 405: "UnsupportedAPI"}.get(code, "Unreadable")


class Api:
    """One kubeconfig context and an HTTP client to its API server."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        import httpx2
        from lightkube import KubeConfig

        from ome_routing.kube import lightkube_adapter

        path = kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
        try:
            if path:
                config = KubeConfig.from_file(Path(path).expanduser())
            else:
                config = KubeConfig.from_env()
            single = config.get(context_name=context)
            if single is None:
                raise KubeconfigError("no context selected")
            self._http = lightkube_adapter.http_client(single, httpx2.Timeout(REQUEST_TIMEOUT))
        except KubeconfigError:
            raise
        except Exception as err:  # lightkube raises several types for a bad kubeconfig
            raise KubeconfigError(str(err)) from None
        self.context: str = single.context_name
        self.namespace: str = single.namespace

    def close(self) -> None:
        self._http.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        import httpx2

        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        seconds = max(0.001, min(timeout, REQUEST_TIMEOUT))
        try:
            request = self._http.build_request(
                method,
                path,
                params=dict(params or {}),
                content=body,
                headers=headers,
                timeout=httpx2.Timeout(seconds),
            )
            response = self._http.send(request, stream=True)
            try:
                data = b""
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > RESPONSE_LIMIT:
                        raise ApiFailure("ResponseTooLarge", code=response.status_code)
            finally:
                response.close()
        except httpx2.TimeoutException:
            raise ApiFailure("Timeout") from None
        except httpx2.HTTPError:
            raise ApiFailure("Unreadable") from None
        if response.status_code >= 300:
            status: Mapping[str, Any] = {}
            try:
                decoded = json.loads(data)
                status = decoded if isinstance(decoded, dict) else {}
            except ValueError:
                pass
            code = response.status_code
            raise ApiFailure(_reason(code), status, code)
        return data

    def get(
        self,
        path: str,
        *,
        timeout: float = REQUEST_TIMEOUT,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """GET `path`; the JSON object the API server answered."""
        data = self._send("GET", path, timeout=timeout, params=params)
        try:
            document = json.loads(data)
        except ValueError:
            raise ApiFailure("Unreadable") from None
        if not isinstance(document, dict):
            raise ApiFailure("Unreadable")
        return document

    def patch(
        self,
        path: str,
        body: str,
        *,
        content_type: str,
        timeout: float = REQUEST_TIMEOUT,
        params: Mapping[str, str] | None = None,
    ) -> bytes:
        """PATCH `path`; the raw answer (the caller checks it)."""
        return self._send(
            "PATCH",
            path,
            timeout=timeout,
            params=params,
            body=body.encode("utf-8"),
            content_type=content_type,
        )


def object_path(resource: str, namespace: str | None, name: str | None = None) -> str:
    path = GROUP_VERSION
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{resource}"
    return path + (f"/{name}" if name else "")
