"""`kubectl ome`: the plugin (`kubectl-ome` on PATH) for multi-cluster routing, as OME ships it.

- `kubectl ome placement endpoint ISVC`: OME's `PlacementEndpointReport` of the service
  and its TrafficMap (`cli.placement`).
- `kubectl ome get trafficmaps [NAME]` (`trafficmap`, `tm`, `tmap`): TrafficMaps as a table.
- `kubectl ome traffic status|explain ISVC`: the service's reported traffic.
- `kubectl ome traffic drain|undrain ISVC --id ID ...`: guarded changes of the
  `ome.io/traffic-drain` annotation.

The reports, tables and checks are pure functions in `ome_routing.kubectl`; these modules
read the kubeconfig, talk to the API server and print. Errors go to stderr as
`error: <message>`, with exit code 1, or 3 when a guarded patch loses a race.
"""

from __future__ import annotations

import sys
import time
from typing import Any, NoReturn

import click

from ome_routing.cli import kubectl_get, kubectl_traffic
from ome_routing.cli.kubectl_api import Api, ApiFailure, KubeconfigError, object_path
from ome_routing.cli.kubectl_common import (
    CliError,
    exactly_one,
    kubeconfig_options,
    now,
    print_report,
)
from ome_routing.core.names import dns1123_label_problems, dns1123_subdomain_problems
from ome_routing.kubectl import placement
from ome_routing.kubectl.drain_checks import ActionError
from ome_routing.kubectl.fallback import codes_help

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
#: How long `placement endpoint` may spend reading, in seconds.
COLLECTION_BUDGET = 30.0
PLACEMENT_OUTPUTS = ("", "table", "wide", "json", "yaml")


@click.group(context_settings=CONTEXT_SETTINGS)
def cli() -> None:
    """Inspect multi-cluster routing and drain workload clusters (alpha)."""


@cli.group(name="placement")
def placement_group() -> None:
    """Inspect reported multi-cluster placement evidence."""


ENDPOINT_HELP = f"""Show reported placement origins and routing evidence.

Reads the InferenceService, then the TrafficMap with its name in its namespace
(RBAC: get inferenceservices, get trafficmaps). Only an InferenceService that cannot
be read fails the command; a missing, forbidden or foreign TrafficMap is a state
of the report (TrafficMap state Unavailable, with its reason). Endpoints show
their origins only, never full URLs; reasons outside OME's lists read
OtherReportedReason; a home's capacity fallback reason shows only as its code.
Recorded probes only: the CLI probes nothing and changes nothing.

\b
Fallback codes (spec.entries[].capacity.fallbackReason):
{codes_help()}
"""


@placement_group.command(help=ENDPOINT_HELP)
@click.argument("isvc", nargs=-1)
@kubeconfig_options
@click.option("-o", "--output", default="table", help="Output format: table, wide, json or yaml")
def endpoint(
    isvc: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    output: str,
) -> None:
    name = exactly_one(isvc)
    if output not in PLACEMENT_OUTPUTS:
        raise CliError("unsupported placement output (supported: table, wide, json, yaml)")
    if dns1123_subdomain_problems(name):
        raise CliError("invalid InferenceService name")
    api: Api | None = None
    try:
        api = Api(kubeconfig, context)
    except KubeconfigError:
        if namespace is None:
            raise CliError("resolve placement namespace failed") from None
    ns = namespace if namespace is not None else api.namespace if api else ""
    if dns1123_label_problems(ns):
        raise CliError("invalid placement namespace")
    if api is None:
        raise CliError("create placement OME client failed")
    try:
        report = collect_endpoint(api, ns, name)
    finally:
        api.close()
    print_report(
        report,
        output,
        lambda: placement.format_endpoint_table(report, wide=output == "wide"),
    )


def collect_endpoint(api: Api, namespace: str, name: str) -> dict[str, Any]:
    """Read the InferenceService, then its TrafficMap, within OME's budgets."""
    deadline = time.monotonic() + COLLECTION_BUDGET
    try:
        isvc = api.get(object_path("inferenceservices", namespace, name))
    except ApiFailure as failure:
        reason = failure.reason if failure.reason != "ResponseTooLarge" else "Unreadable"
        raise CliError(f"InferenceService read unavailable: {reason}") from None
    meta = isvc.get("metadata") if isinstance(isvc.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    generation = meta.get("generation", 0)
    if (
        meta.get("name") != name
        or meta.get("namespace") != namespace
        or not meta.get("uid")
        or (isinstance(generation, int) and generation < 0)
    ):
        raise CliError("InferenceService identity or generation invalid")
    tmap: dict[str, Any] | None = None
    left = deadline - time.monotonic()
    if left <= 0:
        acquisition = placement.unavailable("Timeout")
    else:
        try:
            tmap = api.get(object_path("trafficmaps", namespace, name), timeout=left)
            acquisition = placement.acquired()
        except ApiFailure as failure:
            reason = failure.reason if failure.reason != "ResponseTooLarge" else "Unreadable"
            acquisition = placement.unavailable(reason)
    try:
        return placement.endpoint_report(isvc, tmap, acquisition, now())
    except placement.PlacementError as err:
        raise CliError(str(err)) from None


cli.add_command(kubectl_get.get)
cli.add_command(kubectl_traffic.traffic)


def _usage_message(args: list[str], err: click.UsageError) -> str:
    if isinstance(err, click.NoSuchOption):
        option = err.option_name
        if option.startswith("--"):
            return f"unknown flag: {option}"
        return f"unknown shorthand flag: {option[1:2]!r} in {option}"
    return err.format_message()


def run(argv: list[str] | None = None) -> int:
    """Run the plugin; returns the exit code instead of raising SystemExit."""
    from ome_routing.kubectl.drain_checks import INVALID_FLAGS

    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, prog_name="kubectl ome", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as err:
        action = len(args) > 1 and args[0] == "traffic" and args[1] in ("drain", "undrain")
        message = INVALID_FLAGS if action and "-h" not in args else _usage_message(args, err)
        click.echo(f"error: {message}", err=True)
        return 1
    except click.Abort:
        click.echo("error: context canceled", err=True)
        return 1
    except (ActionError, CliError) as err:
        click.echo(f"error: {err.message}", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("error: context canceled", err=True)
        return 1
    return 0


def main() -> NoReturn:
    """The `kubectl-ome` console script."""
    sys.exit(run())


if __name__ == "__main__":
    main()
