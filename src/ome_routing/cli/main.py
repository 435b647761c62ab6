"""The `ome-routing` command.

Subcommands live in their own modules and load lazily, so that `ome-routing
validate-config` does not import the Kubernetes client and a broken optional
module cannot take the other commands down with it.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from ome_routing import __version__

# name -> "module:attribute" of a click.Command
SUBCOMMANDS: dict[str, str] = {
    "validate-config": "ome_routing.cli.validate:validate_config",
    "simulate": "ome_routing.cli.simulate:simulate",
    "check-reporter": "ome_routing.cli.check_reporter:check_reporter",
    "dev": "ome_routing.cli.dev:dev",
    "reporter": "ome_routing.cli.reporter:reporter",
    "controller": "ome_routing.cli.controller:controller",
    "demo": "ome_routing.cli.demo:demo",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            module_name, attr = self._lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._lazy[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup, lazy=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="ome-routing")
def main() -> None:
    """Multi-cluster routing control plane for OME, with capacity polling."""


if __name__ == "__main__":
    main()
