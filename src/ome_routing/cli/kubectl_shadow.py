"""`kubectl ome traffic diff NAME`: the live TrafficMap beside its ShadowTrafficMap.

Not OME's. Reads the TrafficMap and the ShadowTrafficMap of one name (RBAC: get
trafficmaps, get shadowtrafficmaps) and prints `kubectl.shadow_diff`'s report: a table,
or `-o json|yaml`. A map without a shadow is an error that says how to attach one.
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
    print_report,
    resolved_namespace,
)
from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.core.quoting import quote
from ome_routing.core.shadow import ANNOTATION, API_VERSION
from ome_routing.kubectl import shadow_diff

__all__ = ["diff_command"]

DIFF_HELP = """Show a TrafficMap beside its shadow routing policy's result.

Prints, per home, the live weight, share and ceiling from the TrafficMap and the same
from its ShadowTrafficMap (what the shadow routing policy would route, judged on the
same readings and probe results, never published), with the reason each share differs,
then the shadow settings that could not be evaluated. RBAC: get trafficmaps and
shadowtrafficmaps.
"""


def no_shadow(namespace: str, name: str) -> str:
    return (
        f"TrafficMap {quote(f'{namespace}/{name}')} has no shadow routing policy "
        f"(no ShadowTrafficMap of that name): set the {ANNOTATION} annotation on the "
        "InferenceService, or the chart's shadowRouting"
    )


def _get(api: Api, path: str, what: str, target: str) -> dict[str, Any] | None:
    try:
        return api.get(path)
    except ApiFailure as failure:
        if failure.code == 404:
            return None
        detail = "context deadline exceeded" if failure.reason == "Timeout" else failure.message
        raise CliError(f"get {what} {target}: {detail}") from None


@click.command(name="diff", help=DIFF_HELP)
@click.argument("name", nargs=-1)
@kubeconfig_options
@click.option("-o", "--output", default="table", help="Output format: table, json or yaml")
def diff_command(
    name: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None,
    output: str,
) -> None:  # fmt: skip
    map_name = exactly_one(name)
    if output not in ("", "table", "json", "yaml"):
        raise CliError(f'unsupported output format "{output}" (supported: table, json, yaml)')
    problems = dns1123_subdomain_problems(map_name)
    if problems:
        raise CliError(f"invalid TrafficMap name {quote(map_name)}: {'; '.join(problems)}")
    api = open_api(kubeconfig, context)
    try:
        ns = resolved_namespace(api, namespace)
        target = quote(f"{ns}/{map_name}")
        tmap = _get(api, object_path("trafficmaps", ns, map_name), "TrafficMap", target)
        if tmap is None:
            raise CliError(f'trafficmaps.ome.io "{map_name}" not found')
        path = f"/apis/{API_VERSION}/namespaces/{ns}/shadowtrafficmaps/{map_name}"
        shadow = _get(api, path, "ShadowTrafficMap", target)
        if shadow is None:
            raise CliError(no_shadow(ns, map_name))
    finally:
        api.close()
    report = shadow_diff.diff_report(tmap, shadow)
    print_report(report, output, lambda: shadow_diff.diff_table(report))
