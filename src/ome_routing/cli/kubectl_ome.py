"""`kubectl ome`: the plugin (`kubectl-ome` on PATH) for routing's TrafficMaps and drains.

- `kubectl ome placement endpoint ISVC`: the TrafficMap's conditions and one block per
  home (weight, health, drains, capacity fallback code). Reads the TrafficMap only.
- `kubectl ome traffic drain ISVC --workload-cluster C --id ID --reason R` and
  `kubectl ome traffic undrain ISVC --id ID`: guarded changes of the
  `ome.io/traffic-drain` annotation.

The reports, tables and checks are pure functions in `ome_routing.kubectl`; this module
reads the kubeconfig, talks to the API server and prints. Errors go to stderr as
`error: <message>`, with exit code 1, or 3 when a guarded patch loses a race.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

import click

from ome_routing.kubectl import actions
from ome_routing.kubectl.fallback import codes_help
from ome_routing.kubectl.placement import endpoint_report, format_endpoint_table
from ome_routing.kubectl.table import OUTPUTS, render_document

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CliError(Exception):
    """Stop with `error: <message>` and an exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _now() -> datetime:
    return datetime.now(UTC)


# --- kubeconfig ---------------------------------------------------------------------


def kubeconfig_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The standard kubeconfig flags: --kubeconfig, --context and -n/--namespace."""
    command = click.option(
        "-n",
        "--namespace",
        default=None,
        help="The InferenceService's namespace; default: the kubeconfig context's.",
    )(command)
    command = click.option("--context", default=None, help="The kubeconfig context to use.")(
        command
    )
    return click.option(
        "--kubeconfig",
        default=None,
        help="Path to the kubeconfig file; default: $KUBECONFIG, then ~/.kube/config.",
    )(command)


class Connection:
    """A lightkube client on one kubeconfig context, and that context's name and namespace."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        import httpx2
        from lightkube import Client, KubeConfig
        from lightkube.config.kubeconfig import SingleConfig

        path = kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
        try:
            if path:
                config = KubeConfig.from_file(Path(path).expanduser())
            else:
                config = KubeConfig.from_env()
            single: SingleConfig | None = config.get(context_name=context)
        except Exception as err:  # lightkube raises several types for a bad kubeconfig
            raise CliError(f"load kubeconfig: {err}") from None
        if single is None:
            raise CliError("load kubeconfig: no context selected")
        self.context: str = single.context_name
        self.namespace: str = single.namespace
        # Each request has at most 10 seconds, as kubectl's own plugins allow.
        self.client = Client(
            config=single, timeout=httpx2.Timeout(10.0), field_manager="kubectl-ome"
        )


def _raw(obj: Any) -> dict[str, Any]:
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


def _print_document(document: Mapping[str, Any], output: str) -> None:
    click.echo(render_document(document, output), nl=False)


# --- the command group --------------------------------------------------------------


@click.group(context_settings=CONTEXT_SETTINGS)
def cli() -> None:
    """Inspect multi-cluster routing and drain workload clusters (alpha)."""


@cli.group()
def placement() -> None:
    """Where an InferenceService runs across workload clusters."""


ENDPOINT_HELP = f"""Show the routing table of an InferenceService's TrafficMap.

Reads only the TrafficMap with the InferenceService's name and namespace: its
Routable, OverrideActive, CapacityFallback and Published conditions (status, reason and
whether they are current), then one block per home with its endpoint origin, weight,
health, drains and the code of its capacity fallback reason. -o wide adds each home's
capacity source, allocated, ready and reported counts, factor and drain IDs; -o json and
-o yaml print the whole report. Every output shows a fallback reason as its code only;
read the full text with kubectl get trafficmap. A reason that is too long, not UTF-8 or
holds control characters shows as MalformedPayload and is counted as an issue.

\b
Fallback codes (spec.entries[].capacity.fallbackReason):
{codes_help()}
"""


@placement.command(help=ENDPOINT_HELP)
@click.argument("isvc")
@kubeconfig_options
@click.option(
    "-o",
    "--output",
    default="table",
    show_default=True,
    help="Output format: table, wide, json or yaml.",
)
def endpoint(
    isvc: str, kubeconfig: str | None, context: str | None, namespace: str | None, output: str
) -> None:
    if output not in OUTPUTS:
        raise CliError(f'unsupported output format "{output}" (supported: table, wide, json, yaml)')
    if not actions.is_dns1123_subdomain(isvc):
        raise CliError(f'invalid InferenceService name "{isvc}"')
    from lightkube import ApiError

    from ome_routing.kube.resources import TrafficMap

    connection = Connection(kubeconfig, context)
    ns = namespace or connection.namespace
    try:
        tmap = _raw(connection.client.get(TrafficMap, isvc, namespace=ns))
    except ApiError as err:
        if err.status.code == 404:
            raise CliError(
                f'TrafficMap "{ns}/{isvc}" not found: routing writes one only for a routed '
                "InferenceService while multi-cluster routing is on"
            ) from None
        raise CliError(f'get TrafficMap "{ns}/{isvc}": {err.status.message}') from None
    except Exception as err:
        raise CliError(f'get TrafficMap "{ns}/{isvc}": {err}') from None
    report = endpoint_report(tmap, _now())
    if output in ("json", "yaml"):
        _print_document(report, output)
    else:
        click.echo(format_endpoint_table(report, wide=output == "wide"), nl=False)


@cli.group()
def traffic() -> None:
    """Drain workload clusters out of an InferenceService's TrafficMap (alpha)."""


def action_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--yes", is_flag=True, help="Confirm the exact preview without an interactive prompt."
    )(command)
    command = click.option(
        "-o", "--output", default="table", help="Output: table, wide, json or yaml."
    )(command)
    command = click.option(
        "--dry-run",
        default="none",
        help="Dry-run mode: none, client (send nothing) or server (dryRun=All).",
    )(command)
    return click.option("--id", "drain_id", default=None, help="DNS-1123 drain (override) ID.")(
        command
    )


@traffic.command(
    help="""Hold one workload cluster at weight 0 in the InferenceService's TrafficMap.

Adds an entry keyed by --id to the ome.io/traffic-drain annotation of the
control-plane InferenceService, keeping every other drain and annotation. The patch
carries the uid and resourceVersion read for the preview; if the InferenceService
changed since, nothing is applied and the command exits 3.
"""
)
@click.argument("isvc", nargs=-1)
@click.option("--workload-cluster", default=None, help="The WorkloadCluster to drain.")
@click.option("--reason", default=None, help="Why; readable by anyone who reads the service.")
@action_options
@kubeconfig_options
def drain(isvc: tuple[str, ...], **flags: Any) -> None:
    _run_action(actions.DRAIN, isvc, **flags)


@traffic.command(
    help="""Remove one drain, by its ID, from the InferenceService's ome.io/traffic-drain annotation.

The patch is guarded as for drain: exit code 3 when the InferenceService changed after
it was read.
"""
)
@click.argument("isvc", nargs=-1)
@action_options
@kubeconfig_options
def undrain(isvc: tuple[str, ...], **flags: Any) -> None:
    _run_action(actions.UNDRAIN, isvc, workload_cluster=None, reason=None, **flags)


def _confirm(stdin: TextIO) -> bool:
    """Ask on stderr; a declined, empty or closed answer declines."""
    click.echo(actions.PROMPT, nl=False, err=True)
    sys.stderr.flush()
    answer = stdin.readline(64)
    return actions.confirmed(answer)


def _run_action(
    action: str,
    isvc: tuple[str, ...],
    *,
    workload_cluster: str | None,
    reason: str | None,
    drain_id: str | None,
    dry_run: str,
    output: str,
    yes: bool,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> None:
    from lightkube import ApiError
    from lightkube.types import PatchType

    from ome_routing.kube.resources import InferenceService

    # The flags that need no kubeconfig come first, so that their refusals do not depend on it.
    actions.check_request(
        action,
        isvc,
        namespace="placeholder",
        context="placeholder",
        drain_id=drain_id,
        cluster=workload_cluster,
        reason=reason,
        dry_run=dry_run,
        output=output,
    )
    try:
        connection = Connection(kubeconfig, context)
    except CliError:
        raise CliError(actions.BAD_CONTEXT) from None
    request = actions.check_request(
        action,
        isvc,
        namespace=namespace or connection.namespace,
        context=connection.context,
        drain_id=drain_id,
        cluster=workload_cluster,
        reason=reason,
        dry_run=dry_run,
        output=output,
    )
    try:
        target = _raw(
            connection.client.get(InferenceService, request.name, namespace=request.namespace)
        )
    except Exception:
        raise CliError(actions.READ_FAILED) from None
    plan = actions.plan_action(request, target)
    click.echo(actions.format_preview(plan), nl=False, err=True)
    if not yes and not (sys.stdin.isatty() and _confirm(sys.stdin)):
        raise CliError(actions.NOT_CONFIRMED)
    if request.dry_run != "client":
        try:
            connection.client.patch(
                InferenceService,
                request.name,
                actions.guarded_patch(plan),
                namespace=request.namespace,
                patch_type=PatchType.MERGE,
                dry_run=request.dry_run == "server",
            )
        except ApiError as err:
            if err.status.code == 409:
                raise CliError(actions.CONFLICT, actions.EXIT_CONFLICT) from None
            raise CliError(actions.READ_FAILED) from None
        except Exception:
            raise CliError(actions.READ_FAILED) from None
    result = actions.action_result(plan, _now())
    if request.output in ("json", "yaml"):
        _print_document(result, request.output)
    else:
        click.echo(actions.format_result_table(result, wide=request.output == "wide"), nl=False)


def run(argv: list[str] | None = None) -> int:
    """Run the plugin; returns the exit code instead of raising SystemExit."""
    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, prog_name="kubectl ome", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as err:
        in_traffic = bool(args) and args[0] == "traffic" and "-h" not in args
        message = actions.INVALID_FLAGS if in_traffic else err.format_message()
        click.echo(f"error: {message}", err=True)
        return 1
    except click.Abort:
        click.echo("error: context canceled", err=True)
        return 1
    except actions.ActionError as err:
        click.echo(f"error: {err.message}", err=True)
        return err.exit_code
    except CliError as err:
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
