"""What the `kubectl ome` commands share: the error that stops them, the kubeconfig flags,
cobra's argument count check, the namespace a command works in, and printing a report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from ome_routing.cli.kubectl_api import Api, KubeconfigError
from ome_routing.core.names import dns1123_label_problems
from ome_routing.kubectl.table import render_document


class CliError(Exception):
    """Stop with `error: <message>` and an exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def now() -> datetime:
    return datetime.now(UTC)


def kubeconfig_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The standard kubeconfig flags: --kubeconfig, --context and -n/--namespace."""
    command = click.option(
        "-n", "--namespace", default=None, help="The namespace; default: the context's."
    )(command)
    command = click.option("--context", default=None, help="The kubeconfig context to use.")(
        command
    )
    return click.option(
        "--kubeconfig",
        default=None,
        help="Path to the kubeconfig file; default: $KUBECONFIG, then ~/.kube/config.",
    )(command)


def exactly_one(args: tuple[str, ...]) -> str:
    """Cobra's `ExactArgs(1)`."""
    if len(args) != 1:
        raise CliError(f"accepts 1 arg(s), received {len(args)}")
    return args[0]


def print_report(document: Any, output: str, table: Callable[[], str]) -> None:
    if output in ("json", "yaml"):
        click.echo(render_document(document, output), nl=False)
    else:
        click.echo(table(), nl=False)


def open_api(kubeconfig: str | None, context: str | None) -> Api:
    """The API client of the kubeconfig flags; a kubeconfig that cannot be read stops the
    command with OME's `resolve namespace: ...`."""
    try:
        return Api(kubeconfig, context)
    except KubeconfigError as err:
        raise CliError(f"resolve namespace: {err}") from None


def resolved_namespace(api: Api, namespace: str | None) -> str:
    """`-n` if given, else the kubeconfig context's namespace; refused (with OME's `traffic`
    commands' errors) when empty or not a DNS-1123 label."""
    ns = namespace if namespace is not None else api.namespace
    if ns == "":
        raise CliError("resolved namespace must not be empty")
    problems = dns1123_label_problems(ns)
    if problems:
        raise CliError(f"invalid resolved namespace: {'; '.join(problems)}")
    return ns
