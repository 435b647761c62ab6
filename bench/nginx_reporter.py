"""nginx on loopback as a capacity reporter, for the benchmarks.

Every matching request gets `{"servable": 4, "observedAt": "<now>"}`. nginx is Debian's
`nginx-light`, installed with apt-get when missing (as root; as another user the bench
stops and says what to install).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ome_routing_dev.devcluster import ToolsError
from ome_routing_dev.devcluster.debian import ensure_programs

_CONF = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    server {{
        listen 127.0.0.1:{port};
        location {location} {{
            default_type application/json;
            return 200 '{{"servable": 4, "observedAt": "$time_iso8601"}}';
        }}
    }}
}}
"""


def say(message: str) -> None:
    print(f"[tools] {message}", file=sys.stderr, flush=True)


def ensure_bench_programs(programs: dict[str, str], needed_by: str) -> dict[str, Path]:
    """`programs` ({program: Debian package}), installed when missing; else a clear exit."""
    try:
        return ensure_programs(programs, say, needed_by=needed_by)
    except ToolsError as error:
        raise SystemExit(str(error)) from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def nginx_reporter(location: str = "= /capacity", cpu: int | None = None) -> Iterator[str]:
    """Run nginx in the foreground on a free loopback port; yields its base URL.

    `location` is an nginx location match: `= /capacity` for one path, `~ /capacity$` for
    every endpoint that ends in the poll path. `cpu` pins nginx to that CPU.
    """
    binary = ensure_bench_programs({"nginx": "nginx-light"}, "the benchmarks' reporter")["nginx"]
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as prefix:
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(_CONF.format(prefix=prefix, port=port, location=location))
        proc = subprocess.Popen(
            [binary, "-p", prefix, "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
        )
        try:
            deadline = time.monotonic() + 5
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        raise SystemExit(f"nginx did not start: {err}") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
