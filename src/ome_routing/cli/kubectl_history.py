"""`kubectl ome traffic history NAME`: the journal of a TrafficMap's weight changes.

Reads the TrafficMap (`get trafficmaps`) and the `events.k8s.io/v1` Events of its
namespace that regard it (a field selector on the map's name and kind, every page), and
prints them oldest first (`kubectl.traffic_history`). RBAC: get trafficmaps and list
events.events.k8s.io in the namespace (the user's own). The journal is written only
while the controller runs with `routing.journal.enabled`; the API server keeps Events
for its `--event-ttl` (1 hour by default).
"""

from __future__ import annotations

from typing import Any

import click

from ome_routing.cli.kubectl_api import Api, ApiFailure, object_path
from ome_routing.cli.kubectl_common import (
    CliError,
    exactly_one,
    kubeconfig_options,
    open_api,
    resolved_namespace,
)
from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.core.quoting import quote
from ome_routing.kubectl import traffic_history
from ome_routing.kubectl.read_errors import classify, read_error
from ome_routing.kubectl.table import render_document, render_table

EVENTS = "/apis/events.k8s.io/v1/namespaces/{}/events"
PAGE_SIZE = 500

HISTORY_HELP = """Show the journal of a TrafficMap's weight changes.

Prints the Events the routing controller wrote on the TrafficMap NAME (with
routing.journal.enabled), oldest first: when each change was first and last seen,
how many times (its series count), the home, its weight before and after, and the
cause in words. The API server keeps Events for its --event-ttl (1 hour by default).
RBAC: get trafficmaps and list events.events.k8s.io.
"""


@click.command(name="history", help=HISTORY_HELP)
@click.argument("args", nargs=-1)
@kubeconfig_options
@click.option("-o", "--output", default="table", help="Output format: table, json or yaml")
def history(
    args: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    output: str,
) -> None:
    name = exactly_one(args)
    if output not in ("", "table", "json", "yaml"):
        raise CliError(f'unsupported output format "{output}" (supported: table, json, yaml)')
    problems = dns1123_subdomain_problems(name)
    if problems:
        raise CliError(f"invalid TrafficMap name {quote(name)}: {'; '.join(problems)}")
    api = open_api(kubeconfig, context)
    try:
        ns = resolved_namespace(api, namespace)
        try:
            tmap = api.get(object_path("trafficmaps", ns, name))
        except ApiFailure as failure:
            failed = classify(failure.reason, failure.code, failure.status)
            raise CliError(read_error("get", "trafficmaps", ns, name, failed)) from None
        try:
            events = _events(api, ns, name)
        except ApiFailure as failure:
            failed = classify(failure.reason, failure.code, failure.status)
            if failed[0] == "OMEAPIMissing":
                failed = ("NotFound", "")
            raise CliError(read_error("list", "events", ns, "", failed)) from None
    finally:
        api.close()
    rows = traffic_history.history(tmap, events)
    if output in ("json", "yaml"):
        click.echo(render_document(traffic_history.document(tmap, rows), output), nl=False)
        return
    if not rows:
        click.echo(
            f'No weight changes recorded for trafficmap "{name}" in namespace "{ns}".', err=True
        )
        return
    click.echo(render_table(traffic_history.HEADERS, traffic_history.table_rows(rows)), nl=False)


def _events(api: Api, namespace: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {
            "limit": str(PAGE_SIZE),
            "fieldSelector": f"regarding.kind=TrafficMap,regarding.name={name}",
        }
        if token:
            params["continue"] = token
        page = api.get(EVENTS.format(namespace), params=params)
        raw = page.get("items") or []
        if not isinstance(raw, list):
            raise ApiFailure("Unreadable")
        items += [item for item in raw if isinstance(item, dict)]
        meta = page.get("metadata") or {}
        token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
        if not token:
            return items
