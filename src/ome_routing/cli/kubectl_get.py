"""`kubectl ome get trafficmaps [NAME]` (also `trafficmap`, `tm`, `tmap`).

A name is read with one GET; without one the maps are listed in pages (`-l` filters by
label, `-A` lists every namespace). `-o wide` adds OME's wide columns; `-o json|yaml`
print the objects as stored (a `List` without a name). RBAC: get trafficmaps (a name),
list trafficmaps (no name).
"""

from __future__ import annotations

from typing import Any

import click

from ome_routing.cli.kubectl_api import Api, ApiFailure, KubeconfigError, object_path
from ome_routing.cli.kubectl_common import CliError, kubeconfig_options, now
from ome_routing.kubectl import trafficmaps
from ome_routing.kubectl.objects import Unreadable, read_trafficmap
from ome_routing.kubectl.read_errors import classify, read_error
from ome_routing.kubectl.table import render_document, render_table

__all__ = ["get"]

#: Items per page of a list.
PAGE_SIZE = 500
_TOP_KEYS = ("kind", "apiVersion", "metadata", "spec", "status")


def _as_object(item: dict[str, Any]) -> dict[str, Any]:
    ordered = {key: item[key] for key in _TOP_KEYS if key in item}
    ordered.update((key, value) for key, value in item.items() if key not in ordered)
    ordered.setdefault("kind", "TrafficMap")
    ordered.setdefault("apiVersion", "ome.io/v1beta1")
    return ordered


def _list(api: Api, namespace: str, selector: str) -> list[dict[str, Any]]:
    """Every page of the list; a list whose continue token expired is read again, once."""
    for attempt in (1, 2):
        items: list[dict[str, Any]] = []
        token = ""
        try:
            while True:
                params = {"limit": str(PAGE_SIZE)}
                if selector:
                    params["labelSelector"] = selector
                if token:
                    params["continue"] = token
                page = api.get(object_path("trafficmaps", namespace or None), params=params)
                raw_items = page.get("items") or []
                if not isinstance(raw_items, list):
                    raise ApiFailure("Unreadable")
                items += [item for item in raw_items if isinstance(item, dict)]
                meta = page.get("metadata") or {}
                token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
                if not token:
                    return items
        except ApiFailure as failure:
            if attempt == 1 and token and failure.code == 410:
                continue
            raise
    raise AssertionError("unreachable")


@click.command(name="get")
@click.argument("args", nargs=-1)
@kubeconfig_options
@click.option(
    "-o", "--output", default="", help="Output format: table (default), wide, json or yaml"
)
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces")
@click.option("-l", "--selector", default="", help="Label selector to filter on")
def get(
    args: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    output: str,
    all_namespaces: bool,
    selector: str,
) -> None:
    """List TrafficMaps (trafficmaps, trafficmap, tm, tmap) with OME's routing columns."""
    if not 1 <= len(args) <= 2:
        raise CliError(f"accepts between 1 and 2 arg(s), received {len(args)}")
    try:
        resource = trafficmaps.resolve(args[0])
    except trafficmaps.UnknownResource as err:
        raise CliError(str(err)) from None
    name = args[1] if len(args) == 2 else ""
    try:
        api = Api(kubeconfig, context)
    except KubeconfigError:
        raise CliError("resolve namespace: Unavailable") from None
    try:
        ns = "" if all_namespaces else (namespace if namespace is not None else api.namespace)
        if output not in ("", "table", "wide", "json", "yaml"):
            raise CliError(
                f'unsupported output format "{output}" (supported: table, wide, json, yaml)'
            )
        if name and all_namespaces:
            raise CliError("a resource name cannot be combined with --all-namespaces")
        if name and selector:
            raise CliError("a resource name cannot be combined with --selector")
        operation = "get" if name else "list"
        try:
            items = [api.get(object_path(resource, ns, name))] if name else _list(api, ns, selector)
        except ApiFailure as failure:
            failed = classify(failure.reason, failure.code, failure.status)
            raise CliError(read_error(operation, resource, ns, name, failed)) from None
    finally:
        api.close()
    _print(items, output, name, ns, all_namespaces)


def _print(
    items: list[dict[str, Any]], output: str, name: str, namespace: str, all_namespaces: bool
) -> None:
    if output in ("json", "yaml"):
        objects = [_as_object(item) for item in items]
        document = (
            objects[0]
            if name
            else {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": objects}
        )
        click.echo(render_document(document, output), nl=False)
        return
    if not items:
        where = "" if all_namespaces else f' in namespace "{namespace}"'
        click.echo(f"No {trafficmaps.CANONICAL} found{where}.", err=True)
        return
    try:
        maps = [read_trafficmap(item) for item in items]
    except Unreadable:
        operation = "get" if name else "list"
        failed = ("Unavailable", "")
        raise CliError(
            read_error(operation, trafficmaps.CANONICAL, namespace, name, failed)
        ) from None
    headers, body = trafficmaps.rows(maps, now(), wide=output == "wide", namespaces=all_namespaces)
    click.echo(render_table(headers, body), nl=False)
