"""`ome-routing reporter`: run the reference capacity reporter."""

from __future__ import annotations

from pathlib import Path

import click
from aiohttp import web

from ome_routing.reporter.health import FileHealth, SwitchableHealth, add_health_route
from ome_routing.reporter.server import CountSource, FileCount, StaticCount, make_app


@click.command()
@click.option(
    "--servable", type=click.IntRange(min=0), help="A fixed count of replicas that can serve."
)
@click.option(
    "--servable-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding the count, rewritten by another process; its mtime is the report's observedAt.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--path", "path", default="/capacity", show_default=True, help="Path that answers polls."
)
@click.option(
    "--health-path",
    help="Also answer a model server's health path (such as /v1/models) for health probes.",
)
@click.option(
    "--health-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding the health answer: a status such as 200 or 503, or 'stall'; "
    "missing means 200. Rewrite it to switch the answer while the reporter runs.",
)
def reporter(
    servable: int | None,
    servable_file: Path | None,
    host: str,
    port: int,
    path: str,
    health_path: str | None,
    health_file: Path | None,
) -> None:
    """Serve capacity reports in the Report format for one home."""
    source: CountSource
    if servable is not None and servable_file is None:
        source = StaticCount(servable)
    elif servable_file is not None and servable is None:
        source = FileCount(servable_file)
    else:
        raise click.UsageError("give exactly one of --servable or --servable-file")
    if not path.startswith("/"):
        raise click.BadParameter(f"{path!r} must start with /", param_hint="--path")
    if health_file is not None and health_path is None:
        raise click.UsageError("--health-file needs --health-path")
    app = make_app(source, path)
    if health_path is not None:
        if not health_path.startswith("/") or health_path == path:
            raise click.BadParameter(
                f"{health_path!r} must start with / and differ from --path",
                param_hint="--health-path",
            )
        health = FileHealth(health_file) if health_file is not None else SwitchableHealth()
        add_health_route(app, health, health_path)
        click.echo(f"health on http://{host}:{port}{health_path}", err=True)
    click.echo(f"reporting on http://{host}:{port}{path}", err=True)
    web.run_app(app, host=host, port=port, print=None)
