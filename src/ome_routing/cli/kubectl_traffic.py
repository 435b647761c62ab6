"""`kubectl ome traffic`: `status` and `explain` (read-only), `drain` and `undrain` (guarded).

Status and explain read only the InferenceService and print OME's `TrafficStatusReport`
and `TrafficExplainReport` (`kubectl.traffic_status`, `kubectl.traffic_explain`).

Drain and undrain read the InferenceService, print the exact change to stderr, ask for
confirmation (`--yes` in scripts), then send one JSON Patch that tests the uid and
resourceVersion read; the whole action has 45 seconds, each request 10. The API
server's answer must name the same InferenceService, else the outcome is reported
unknown. RBAC: get and patch inferenceservices.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import click

from ome_routing.cli import kubectl_history
from ome_routing.cli.kubectl_api import Api, ApiFailure, KubeconfigError, object_path
from ome_routing.cli.kubectl_common import (
    CliError,
    exactly_one,
    kubeconfig_options,
    now,
    open_api,
    print_report,
    resolved_namespace,
)
from ome_routing.cli.kubectl_shadow import diff_command
from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.core.quoting import quote
from ome_routing.kubectl import (
    actions,
    drain_checks,
    traffic_explain,
    traffic_status,
    traffic_tables,
)
from ome_routing.kubectl.decode import Unreadable
from ome_routing.kubectl.drain_checks import DRAIN, UNDRAIN, PatchConflict, Refused

__all__ = ["traffic"]

#: How long one drain or undrain may take, in seconds.
ACTION_BUDGET = 45.0
JSON_PATCH = "application/json-patch+json"
_GUARD_MESSAGE = "the server rejected our request due to an error in our request"


@click.group(name="traffic")
def traffic() -> None:
    """Inspect traffic evidence and manage guarded drains."""


STATUS_HELP = """Show controller-reported traffic status.

Shows bounded controller-reported traffic evidence from one InferenceService: the
backend traffic policy in status.traffic (algorithm, emitted policy, targeted
HTTPRoutes, conditions), its addresses, its canary and each component's revision
weights. It reads nothing else (RBAC: get inferenceservices) and does not prove
data-plane realization or live reachability. placement endpoint shows the routing
table across workload clusters.
"""

EXPLAIN_HELP = """Explain declared and reported traffic behavior.

Compares the traffic the InferenceService declares (spec.traffic, the ome.io
backend-policy annotations, a canary rollout group) with what its controller reports
supporting and realizing (RBAC: get inferenceservices). Annotations, headers,
condition messages, UIDs and resource versions are never printed.
"""

MISSING_API = (
    "OME does not appear to be installed on this cluster (the ome.io API is not available; "
    "install OME first — see https://github.com/ome-projects/ome#installation)"
)
_EXPLAIN_FAILURES = {
    404: "not found",
    403: "forbidden",
    401: "unauthorized",
    429: "request throttled",
    503: "service unavailable",
    500: "server error",
    504: "request timed out",
}


def _read_service(
    kubeconfig: str | None, context: str | None, namespace: str | None, args: tuple[str, ...],
    output: str, sanitized: bool,
) -> dict[str, Any]:  # fmt: skip
    """OME's `traffic status` / `explain` checks, then the InferenceService as read."""
    name = exactly_one(args)
    if output not in ("", "table", "wide", "json", "yaml"):
        raise CliError(f'unsupported output format "{output}" (supported: table, wide, json, yaml)')
    problems = dns1123_subdomain_problems(name)
    if problems:
        raise CliError(f"invalid InferenceService name {quote(name)}: {'; '.join(problems)}")
    api = open_api(kubeconfig, context)
    try:
        ns = resolved_namespace(api, namespace)
        target = quote(f"{ns}/{name}")
        try:
            isvc = api.get(object_path("inferenceservices", ns, name))
        except ApiFailure as failure:
            if sanitized:
                suffix = "request timed out" if failure.reason == "Timeout" else None
                suffix = suffix or _EXPLAIN_FAILURES.get(failure.code, "API request failed")
                raise CliError(f"get InferenceService {target}: {suffix}") from None
            if failure.code == 404 and not failure.named:
                raise CliError(f"get InferenceService {target}: {MISSING_API}") from None
            detail = "context deadline exceeded" if failure.reason == "Timeout" else failure.message
            raise CliError(f"get InferenceService {target}: {detail}") from None
    finally:
        api.close()
    meta = isvc.get("metadata") if isinstance(isvc.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if meta.get("name") != name:
        raise CliError("returned inference service name does not match request")
    if meta.get("namespace") != ns:
        raise CliError("returned inference service namespace does not match request")
    if not meta.get("uid"):
        raise CliError("returned inference service has no UID")
    return isvc


traffic.add_command(diff_command)  # not OME's: a shadow routing policy beside the live map


@traffic.command(name="status", help=STATUS_HELP)
@click.argument("isvc", nargs=-1)
@kubeconfig_options
@click.option("-o", "--output", default="table", help="Output format: table, wide, json or yaml")
def status_command(
    isvc: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None,
    output: str,
) -> None:  # fmt: skip
    raw = _read_service(kubeconfig, context, namespace, isvc, output, sanitized=False)
    try:
        report = traffic_status.project_status(raw, now())
    except Unreadable as err:
        raise CliError(f"project traffic status for InferenceService: {err}") from None
    print_report(report, output, lambda: traffic_tables.status_table(report, wide=output == "wide"))


@traffic.command(name="explain", help=EXPLAIN_HELP)
@click.argument("isvc", nargs=-1)
@kubeconfig_options
@click.option("-o", "--output", default="table", help="Output format: table, wide, json or yaml")
def explain_command(
    isvc: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None,
    output: str,
) -> None:  # fmt: skip
    raw = _read_service(kubeconfig, context, namespace, isvc, output, sanitized=True)
    try:
        report = traffic_explain.project_explain(raw, now())
    except Unreadable as err:
        raise CliError(f"project traffic explanation for InferenceService: {err}") from None
    print_report(
        report, output, lambda: traffic_tables.explain_table(report, wide=output == "wide")
    )


ACTION_HELP = """Alpha: {action} one cross-cluster traffic arm.

Alpha guarded traffic action on one control-plane InferenceService. Drain adds one
independently removable ome.io/traffic-drain override; undrain removes exactly one
existing ID. The existing annotation is parsed strictly: unknown fields, duplicates,
unsafe values and overflow refuse. The request tests the exact InferenceService UID
and resourceVersion (exit code 3 when it changed since it was read) and keeps every
other annotation and override ID. Confirmation or --yes is required; --dry-run=client
sends nothing, --dry-run=server sends the same patch with dryRun=All.

The preview and prompt go to stderr; stdout is one ActionResult. API acceptance is not
TrafficMap convergence; follow up with traffic status. The action has 45 seconds, each
request 10. RBAC: get and patch inferenceservices.
"""


def action_options(action: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option(
            "-o", "--output", default="table", help="Output: table, wide (bounded), json or yaml"
        )(command)
        command = click.option(
            "--dry-run", default="none", help="Dry-run mode: none, client or server"
        )(command)
        command = click.option(
            "--yes", is_flag=True, help="Confirm the exact preview without an interactive prompt"
        )(command)
        if action == DRAIN:
            command = click.option(
                "--reason", default="", help="Bounded non-secret operator reason (required)"
            )(command)
            command = click.option(
                "--workload-cluster",
                default="",
                help="WorkloadCluster DNS name to drain (required)",
            )(command)
        command = click.option(
            "--id", "drain_id", default="", help="DNS-1123 override ID (required)"
        )(command)
        return kubeconfig_options(command)

    return decorate


@traffic.command(help=ACTION_HELP.format(action="drain"))
@click.argument("isvc", nargs=-1)
@action_options(DRAIN)
def drain(isvc: tuple[str, ...], **flags: Any) -> None:
    _run_action(DRAIN, isvc, **flags)


@traffic.command(help=ACTION_HELP.format(action="undrain"))
@click.argument("isvc", nargs=-1)
@action_options(UNDRAIN)
def undrain(isvc: tuple[str, ...], **flags: Any) -> None:
    _run_action(UNDRAIN, isvc, workload_cluster="", reason="", **flags)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Refused(drain_checks.DEADLINE)
    return left


def _read_failure(failure: ApiFailure) -> Refused:
    if failure.reason == "Timeout":
        return Refused(drain_checks.DEADLINE)
    return Refused(drain_checks.READ_FAILED)


def _guard_rejected(failure: ApiFailure) -> bool:
    """A 409, or the 422 of a failed `test` operation, and nothing else."""
    if failure.code == 409:
        return True
    if failure.code != 422:
        return False
    status = failure.status
    details = status.get("details")
    return (
        status.get("status") == "Failure"
        and status.get("reason") == "Invalid"
        and status.get("message") == _GUARD_MESSAGE
        and isinstance(details, Mapping)
        and not any(details.get(key) for key in ("name", "group", "kind", "uid"))
        and not details.get("retryAfterSeconds")
        and not details.get("causes")
    )


def _run_action(
    action: str,
    isvc: tuple[str, ...],
    *,
    workload_cluster: str,
    reason: str,
    drain_id: str,
    dry_run: str,
    output: str,
    yes: bool,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> None:
    from ome_routing.cli.kubectl_confirm import confirm

    drain_checks.check_flags(
        action,
        isvc,
        drain_id=drain_id,
        cluster=workload_cluster,
        reason=reason,
        dry_run=dry_run,
        output=output,
    )
    deadline = time.monotonic() + ACTION_BUDGET
    api: Api | None = None
    with contextlib.suppress(KubeconfigError):
        api = Api(kubeconfig, context)
    resolved = namespace if namespace is not None else (api.namespace if api else None)
    ns, context_name = drain_checks.check_scope(resolved, api.context if api else None)
    assert api is not None
    request = drain_checks.ActionRequest(
        action=action,
        name=isvc[0],
        namespace=ns,
        context=context_name,
        drain_id=drain_id,
        dry_run=dry_run,
        output=output,
        cluster=workload_cluster,
        reason=reason,
    )
    path = object_path("inferenceservices", ns, request.name)
    try:
        try:
            target = api.get(path, timeout=_left(deadline))
        except ApiFailure as failure:
            raise _read_failure(failure) from None
        plan = actions.plan_action(request, target)
        click.echo(actions.format_preview(plan), nl=False, err=True)
        if not yes:
            confirm(sys.stdin, sys.stderr, deadline)
        _left(deadline)
        accepted = False
        if dry_run != "client":
            _send(api, path, plan, deadline)
            accepted = True
    finally:
        api.close()
    result = actions.action_result(plan, now(), accepted=accepted)
    try:
        if output in ("json", "yaml"):
            from ome_routing.kubectl.table import render_document

            click.echo(render_document(result, output), nl=False)
        else:
            click.echo(actions.format_result_table(result, wide=output == "wide"), nl=False)
    except OSError:
        raise Refused(actions.WRITE_FAILED) from None


def _send(api: Api, path: str, plan: actions.ActionPlan, deadline: float) -> None:
    params = {"dryRun": "All"} if plan.request.dry_run == "server" else None
    try:
        body = api.patch(
            path,
            plan.patch,
            content_type=JSON_PATCH,
            timeout=_left(deadline),
            params=params,
        )
    except ApiFailure as failure:
        if failure.reason == "ResponseTooLarge":
            raise Refused(actions.NOT_SAFELY_BOUND) from None
        if _guard_rejected(failure):
            raise PatchConflict(actions.CONFLICT) from None
        raise _read_failure(failure) from None
    actions.check_response(body, plan)


# not OME's: the journal of weight changes (`routing.journal.enabled`)
traffic.add_command(kubectl_history.history)
