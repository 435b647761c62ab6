"""lightkube where routing needs more than its public API: every use of its internals.

lightkube's `AsyncClient` builds each request with a request layer (`client._client`, a
`GenericAsyncClient`) that holds the path rules, the auth and the error mapping, and
sends it with that layer's `send`. Routing needs a few things the public calls do not
offer, and gets them from that layer, here and nowhere else:

- every request of a client passing a check on its way out (`filter_sends`, for
  `fencing.FencedClient`): the layer's `send`, wrapped;
- a request with parameters or a body that lightkube's calls do not send
  (`send_request`): a DELETE with preconditions, a read at `resourceVersion=0`;
- a watch request that asks for bookmarks and has a read timeout of its own
  (`open_watch`, `watch_event`, `raise_for_status`);
- the synchronous HTTP client of one kubeconfig context, for the plugin
  (`http_client`);
- the kind of a resource class (`kind_of`);
- what `lease_wire.LeaseWire` needs to send a request as the client would: the TLS
  context of a kubeconfig context (`tls_context`), the client's field manager
  (`field_manager`), whether its requests to a URL go through a proxy (`proxied`), and
  the `ApiError` of an error answer (`api_error`).

`SUPPORTED` is the range of lightkube this module was written against, the range
`pyproject.toml` allows; `tests/unit/test_dependency_adapters.py` fails on a version
outside it, or when a shape relied on here (a signature, an attribute) changes.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any, cast

import httpx2
import msgspec
from lightkube import AsyncClient
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User
from lightkube.core import decoders
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import ALL_NS, GenericClient
from lightkube.core.selector import build_selector
from lightkube.models.meta_v1 import Status

#: the versions of lightkube this module was written for (`pyproject.toml` pins the same)
SUPPORTED = ">=1.0.1,<1.1"

#: the `namespace` of a list or watch across every namespace
ALL_NAMESPACES: str = ALL_NS

#: the request layer's own `send`: a request, and whether its answer is streamed
Send = Callable[[httpx2.Request, bool], Awaitable[httpx2.Response]]


#: what `filter_sends` puts in front of `Send`: it sends the request with the `Send` it is
#: given (or refuses it), and returns the answer
SendFilter = Callable[[httpx2.Request, bool, Send], Awaitable[httpx2.Response]]


def filter_sends(client: AsyncClient, send_filter: SendFilter) -> None:
    """Make every request of `client` go through `send_filter`.

    Every call of lightkube's client (create, replace, patch, apply, delete,
    deletecollection, get, list, watch) and `send_request` and `open_watch` send through
    the request layer's `send`, which this wraps.
    """
    requests = client._client
    unfiltered = requests.send

    async def send_unfiltered(request: httpx2.Request, stream: bool) -> httpx2.Response:
        response: httpx2.Response = await unfiltered(request, stream=stream)  # type: ignore[no-untyped-call]
        return response

    async def send(request: httpx2.Request, stream: bool = False) -> httpx2.Response:
        return await send_filter(request, stream, send_unfiltered)

    requests.send = send  # type: ignore[method-assign]


async def send_request(
    client: AsyncClient,
    method: str,
    resource: Any,
    *,
    name: str | None = None,
    namespace: str | None = None,
    params: dict[str, str] | None = None,
    data: Any = None,
) -> httpx2.Response:
    """One request built, sent and checked by the client's request layer as its own calls
    are (the path, the auth, the client's filter, `ApiError` on an error answer), with
    `params` and a body (`data`) that those calls do not send. Returns the answer, read.
    """
    requests = client._client
    request = requests.prepare_request(
        method, resource, name=name, namespace=namespace, params=params
    )
    if data is not None:
        request.data = data
    response: httpx2.Response = await requests.send(requests.build_adapter_request(request))  # type: ignore[no-untyped-call]
    requests.handle_response(method, response, request)
    return response


async def open_watch(
    client: AsyncClient,
    resource: Any,
    *,
    all_namespaces: bool,
    params: dict[str, Any],
    read_timeout: float,
    namespace: str | None = None,
) -> httpx2.Response:
    """Send a watch request of `resource` (across every namespace if `all_namespaces`,
    else in `namespace`, or the client's own when None) with `params`, through the
    client's request layer (the path, the auth, the client's filter), whose read timeout
    is `read_timeout` (the other timeouts are the client's for watches). Returns the
    answer, streamed and unchecked: its caller closes it."""
    requests = client._client
    request = requests.prepare_request(
        "list",
        resource,
        namespace=ALL_NS if all_namespaces else namespace,
        watch=True,
        params=params,
    )
    base = requests._watch_timeout
    request.timeout = httpx2.Timeout(
        connect=base.connect, read=read_timeout, write=base.write, pool=base.pool
    )
    response: httpx2.Response = await requests.send(  # type: ignore[no-untyped-call]
        requests.build_adapter_request(request), stream=True
    )
    return response


def raise_for_status(response: httpx2.Response) -> None:
    """Raise for an error answer as lightkube's calls do: `ApiError` when it carries a
    Kubernetes Status, else `httpx2.HTTPStatusError`."""
    GenericClient.raise_for_status(response)  # type: ignore[no-untyped-call]


def watch_event(line: str) -> tuple[str, msgspec.Raw]:
    """One line of a watch: its type and its object, undecoded; `ApiError` for an ERROR."""
    event = decoders.decode_watch_event(line)  # type: ignore[arg-type]  # msgspec reads str too
    if event.type == "ERROR":
        raise ApiError(status=decoders.decode_status(event.object))
    return event.type, event.object


def label_selector(labels: dict[str, Any]) -> str:
    """A `labelSelector` parameter, from labels as lightkube's `labels=` takes them."""
    return build_selector(labels)


def http_client(config: SingleConfig, timeout: httpx2.Timeout) -> httpx2.Client:
    """A synchronous HTTP client of one kubeconfig context: its server as base URL, its
    TLS and its user's auth, as lightkube's own clients are configured."""
    return client_adapter.Client(config, client_adapter.ConnectionParams(timeout=timeout))


def kind_of(resource: Any) -> str:
    """The kind of a lightkube resource class (`Pod`, or a generic resource's)."""
    kind: str = resource._api_info.resource.kind
    return kind


def tls_context(config: SingleConfig) -> ssl.SSLContext:
    """The TLS context lightkube's clients use for `config`: its cluster's CA (or the
    system's, or none with `insecure-skip-tls-verify`) and its user's client certificate."""
    user = config.user or User()
    return client_adapter.verify_cluster(config.cluster, user, config.abs_file)


def field_manager(client: AsyncClient) -> str | None:
    """The `fieldManager` that `client` sends with its writes (None: none)."""
    manager: str | None = client._client._field_manager
    return manager


def proxied(client: AsyncClient, url: str) -> bool:
    """Whether `client` sends its requests to `url` through a proxy (from the
    environment's `HTTPS_PROXY` family, which lightkube's clients follow by default)."""
    http = client._client._client
    return http._transport_for_url(httpx2.URL(url)) is not http._transport


def api_error(status_code: int, body: bytes) -> ApiError:
    """The `ApiError` of an error answer, as lightkube's calls raise it: the answer's
    `Status` when it is one, else a Status with the HTTP status and the body's start."""
    status: Status | None
    try:
        status = cast(Status, Status.from_dict(msgspec.json.decode(body)))
    except (msgspec.DecodeError, TypeError, ValueError):
        status = None
    if status is None or status.code is None:
        text = body[:200].decode("utf-8", "replace")
        status = Status(code=status_code, message=f"HTTP {status_code}: {text}")
    return ApiError(status=status)
