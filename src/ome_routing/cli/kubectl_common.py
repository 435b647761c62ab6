"""What the `kubectl ome` commands share: the error that stops them, the kubeconfig flags,
cobra's argument count check, and printing a report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

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
