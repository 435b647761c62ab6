"""`ome-routing reporter`: run the reference capacity reporter."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import click
from aiohttp import web

from ome_routing.cli.reporter_kubernetes import kubernetes_options, run_kubernetes
from ome_routing.reporter.health import FileHealth, SwitchableHealth, add_health_route
from ome_routing.reporter.server import CountSource, FileCount, StaticCount, make_app
from ome_routing.reporter.tls import (
    CERT_OPTION,
    CLIENT_CA_OPTION,
    KEY_OPTION,
    TlsSettingError,
    server_context,
)

_FILE = click.Path(dir_okay=False, path_type=Path)


def tls_options(command: Any) -> Any:
    """`--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file`: serve HTTPS."""
    for option in reversed(
        (
            click.option(
                CERT_OPTION,
                "tls_cert_file",
                type=_FILE,
                help=f"Serve HTTPS with this PEM certificate (and its chain); needs {KEY_OPTION}.",
            ),
            click.option(
                KEY_OPTION,
                "tls_key_file",
                type=_FILE,
                help=f"The PEM private key of {CERT_OPTION}.",
            ),
            click.option(
                CLIENT_CA_OPTION,
                "client_ca_file",
                type=_FILE,
                help="With HTTPS: require a client certificate signed by a CA of this PEM bundle.",
            ),
        )
    ):
        command = option(command)
    return command


def tls_context(options: dict[str, Any]) -> ssl.SSLContext | None:
    """The serving context the TLS options ask for; None for plain HTTP."""
    cert, key, client_ca = (
        options.pop("tls_cert_file"),
        options.pop("tls_key_file"),
        options.pop("client_ca_file"),
    )
    if cert is None and key is None:
        if client_ca is not None:
            raise click.UsageError(f"{CLIENT_CA_OPTION} needs {CERT_OPTION} and {KEY_OPTION}")
        return None
    if cert is None or key is None:
        raise click.UsageError(f"give both {CERT_OPTION} and {KEY_OPTION}, or neither")
    try:
        return server_context(cert, key, client_ca)
    except TlsSettingError as err:
        raise click.UsageError(str(err)) from None


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
    "--serve-health-path",
    "serve_health_path",
    help="Also answer a model server's health path (such as /v1/models) for health probes, "
    "as a stand-in for the model server.",
)
@click.option(
    "--serve-health-file",
    "serve_health_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding that health answer: a status such as 200 or 503, or 'stall'; "
    "missing means 200. Rewrite it to switch the answer while the reporter runs.",
)
@tls_options
@kubernetes_options
def reporter(
    servable: int | None,
    servable_file: Path | None,
    host: str,
    port: int,
    path: str,
    serve_health_path: str | None,
    serve_health_file: Path | None,
    **options: Any,
) -> None:
    """Serve capacity reports in the Report format for one home.

    With --kubernetes, serve every InferenceService of this cluster, counted from its API.
    With --tls-cert-file and --tls-private-key-file, serve HTTPS (both modes).
    """
    if not path.startswith("/"):
        raise click.BadParameter(f"{path!r} must start with /", param_hint="--path")
    context = tls_context(options)
    if options["kubernetes"]:
        if servable is not None or servable_file is not None:
            raise click.UsageError("--kubernetes takes neither --servable nor --servable-file")
        if serve_health_path is not None or serve_health_file is not None:
            raise click.UsageError(
                "--kubernetes takes neither --serve-health-path nor --serve-health-file"
            )
        run_kubernetes(host, port, path, options, ssl_context=context)
        return
    source: CountSource
    if servable is not None and servable_file is None:
        source = StaticCount(servable)
    elif servable_file is not None and servable is None:
        source = FileCount(servable_file)
    else:
        raise click.UsageError("give exactly one of --servable or --servable-file")
    if serve_health_file is not None and serve_health_path is None:
        raise click.UsageError("--serve-health-file needs --serve-health-path")
    app = make_app(source, path)
    if serve_health_path is not None:
        if not serve_health_path.startswith("/") or serve_health_path == path:
            raise click.BadParameter(
                f"{serve_health_path!r} must start with / and differ from --path",
                param_hint="--serve-health-path",
            )
        health = (
            FileHealth(serve_health_file) if serve_health_file is not None else SwitchableHealth()
        )
        add_health_route(app, health, serve_health_path)
    listener = _listen(host, port)
    # the port bound, which `--port 0` leaves to the system
    bound = listener.getsockname()[1]
    scheme = "http" if context is None else "https"
    if serve_health_path is not None:
        click.echo(f"health on {scheme}://{host}:{bound}{serve_health_path}", err=True)
    click.echo(f"reporting on {scheme}://{host}:{bound}{path}", err=True)
    web.run_app(app, sock=listener, print=None, ssl_context=context)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port`, or a usage error that names them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as err:
        raise click.UsageError(
            f"cannot listen on --host {host} --port {port}: {err.strerror or err}"
        ) from err
