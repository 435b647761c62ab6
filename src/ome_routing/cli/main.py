"""The `ome-routing` command.

Subcommands live in their own modules and load lazily, so that `ome-routing
validate-config` does not import the Kubernetes client and a broken optional
module cannot take the other commands down with it.

Other installed distributions add subcommands through the entry-point group
`ome_routing.subcommands` (name = "module:attribute" of a click.Command): the development
kit (devkit/, `ome-routing-dev`) adds `dev` and `demo`. Without it those two are a usage
error that says where they come from.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

import click

from ome_routing import __version__

# name -> "module:attribute" of a click.Command
SUBCOMMANDS: dict[str, str] = {
    "validate-config": "ome_routing.cli.validate:validate_config",
    "simulate": "ome_routing.cli.simulate:simulate",
    "check-reporter": "ome_routing.cli.check_reporter:check_reporter",
    "reporter": "ome_routing.cli.reporter:reporter",
    "controller": "ome_routing.cli.controller:controller",
}

#: The entry-point group through which installed distributions add subcommands.
SUBCOMMAND_GROUP = "ome_routing.subcommands"
#: The subcommands of the development kit, named when it is not installed.
KIT_COMMANDS = ("dev", "demo")
KIT_MISSING = (
    "`ome-routing {name}` is part of ome-routing's development kit (ome-routing-dev), which "
    "is not installed; from a clone of the repository: pip install -c constraints.txt -e . "
    "-e ./devkit (or make setup)"
)


def installed_subcommands() -> dict[str, str]:
    """name -> "module:attribute" of the subcommands installed distributions register."""
    return {point.name: point.value for point in entry_points(group=SUBCOMMAND_GROUP)}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def _all_lazy(self) -> dict[str, str]:
        # the package's own first: an installed distribution adds names, never replaces one
        return installed_subcommands() | self._lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._all_lazy()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # the package's own commands read no distribution metadata
        lazy = self._lazy if cmd_name in self._lazy else self._all_lazy()
        if cmd_name in lazy:
            module_name, attr = lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{lazy[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        # only a kit command's name reads the metadata: the package's own read none
        if (
            name in KIT_COMMANDS
            and not ctx.resilient_parsing
            and name not in self.commands
            and name not in self._all_lazy()
        ):
            raise click.UsageError(KIT_MISSING.format(name=name), ctx)
        return super().resolve_command(ctx, args)


@click.group(
    cls=LazyGroup, lazy=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="ome-routing")
def main() -> None:
    """Multi-cluster routing control plane for OME, with capacity polling."""


if __name__ == "__main__":
    main()
