"""`ome-routing dev` and `ome-routing demo` come from the development kit (devkit/), through
the entry-point group `ome_routing.subcommands`; without the kit they are a usage error
that names it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner

from ome_routing.cli import main as cli_main

BIN = Path(sys.executable).parent


def entry_points_of(*points: EntryPoint) -> Callable[..., list[EntryPoint]]:
    def entry_points(*, group: str) -> list[EntryPoint]:
        assert group == cli_main.SUBCOMMAND_GROUP
        return list(points)

    return entry_points


@pytest.fixture
def no_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where only the product is installed: no distribution registers a subcommand."""
    monkeypatch.setattr(cli_main, "entry_points", entry_points_of())


@pytest.mark.parametrize("name", ["dev", "demo"])
def test_a_kit_command_without_the_kit_says_it_needs_the_kit_and_exits_2(
    no_kit: None, name: str
) -> None:
    result = CliRunner().invoke(cli_main.main, [name, "--help"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        f"Error: `ome-routing {name}` is part of ome-routing's development kit "
        "(ome-routing-dev), which is not installed; from a clone of the repository: "
        "pip install -c constraints.txt -e . -e ./devkit (or make setup)"
    )


def test_without_the_kit_the_help_lists_the_products_commands_only(no_kit: None) -> None:
    result = CliRunner().invoke(cli_main.main, ["--help"])
    assert result.exit_code == 0
    section = result.output.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in section.splitlines() if line.startswith("  ")] == [
        "check-reporter",
        "controller",
        "reporter",
        "simulate",
        "validate-config",
    ]


def test_an_unknown_command_stays_clicks_own_error(no_kit: None) -> None:
    result = CliRunner().invoke(cli_main.main, ["devv"])
    assert result.exit_code == 2
    assert "No such command 'devv'" in result.output


def test_a_registered_entry_point_is_a_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever module a distribution names is loaded when its command runs."""
    point = EntryPoint("dev", "ome_routing.cli.validate:validate_config", cli_main.SUBCOMMAND_GROUP)
    monkeypatch.setattr(cli_main, "entry_points", entry_points_of(point))
    result = CliRunner().invoke(cli_main.main, ["dev", "--help"])
    assert result.exit_code == 0
    assert result.output.startswith("Usage: main dev [OPTIONS]")
    assert "Check the chart's multi-cluster values" in result.output


def test_an_entry_point_cannot_replace_a_product_command(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(
        "controller", "ome_routing.cli.validate:validate_config", cli_main.SUBCOMMAND_GROUP
    )
    monkeypatch.setattr(cli_main, "entry_points", entry_points_of(point))
    command = cli_main.main.get_command(
        cli_main.main.make_context("ome-routing", ["controller"]), "controller"
    )
    assert command is not None and command.name == "controller"


def test_the_products_own_commands_read_no_distribution_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller starts without scanning every installed distribution's entry points."""
    read: list[str] = []

    def entry_points(*, group: str) -> list[EntryPoint]:
        read.append(group)
        return []

    monkeypatch.setattr(cli_main, "entry_points", entry_points)
    result = CliRunner().invoke(cli_main.main, ["validate-config", "--help"])
    assert result.exit_code == 0
    assert result.output.startswith("Usage: main validate-config [OPTIONS]")
    assert read == []


@pytest.mark.parametrize(
    ("name", "usage"),
    [("dev", "Usage: ome-routing dev [OPTIONS] COMMAND"), ("demo", "Usage: ome-routing demo")],
)
def test_the_installed_cli_runs_the_kits_commands(name: str, usage: str) -> None:
    """The real `ome-routing` of this virtualenv, with the kit installed as `make` does."""
    result = subprocess.run(
        [str(BIN / "ome-routing"), name, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(usage)


def test_the_demo_finds_the_checkout_the_kit_was_installed_from() -> None:
    """Run from another directory, `ome-routing demo` reads the examples of the checkout
    whose devkit/ is installed (editable)."""
    from ome_routing_dev.cli import demo
    from ome_routing_dev.demo import find_repo

    assert find_repo([demo._PACKAGE_REPO]) == Path(__file__).resolve().parents[2]
