"""`ome-routing reporter`: run the reference capacity reporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from aiohttp import web

from ome_routing.cli.reporter_kubernetes import kubernetes_options, run_kubernetes
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
@kubernetes_options
def reporter(
    servable: int | None,
    servable_file: Path | None,
    host: str,
    port: int,
    path: str,
    **options: Any,
) -> None:
    """Serve capacity reports in the Report format for one home.

    With --kubernetes, serve every InferenceService of this cluster, counted from its API.
    """
    if not path.startswith("/"):
        raise click.BadParameter(f"{path!r} must start with /", param_hint="--path")
    if options["kubernetes"]:
        if servable is not None or servable_file is not None:
            raise click.UsageError("--kubernetes takes neither --servable nor --servable-file")
        run_kubernetes(host, port, path, options)
        return
    source: CountSource
    if servable is not None and servable_file is None:
        source = StaticCount(servable)
    elif servable_file is not None and servable is None:
        source = FileCount(servable_file)
    else:
        raise click.UsageError("give exactly one of --servable or --servable-file")
    if not path.startswith("/"):
        raise click.BadParameter(f"{path!r} must start with /", param_hint="--path")
    click.echo(f"reporting on http://{host}:{port}{path}", err=True)
    web.run_app(make_app(source, path), host=host, port=port, print=None)
