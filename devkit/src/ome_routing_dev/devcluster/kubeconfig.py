"""How clients reach a local control plane: its admin kubeconfig and a matching TLS context."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path

from ome_routing_dev.devcluster.pki import Pki


def write_admin_kubeconfig(path: Path, server_url: str, pki: Pki) -> None:
    """A kubeconfig with one context, `local`, as `admin` (group `system:masters`).

    The certificates are embedded, so the file stands alone; it is JSON, which every
    kubeconfig reader takes as YAML.
    """

    def b64(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server_url, "certificate-authority-data": b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(pki.admin_cert),
                    "client-key-data": b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


def client_ssl_context(pki: Pki) -> ssl.SSLContext:
    """TLS that trusts only the control plane's CA and presents the admin certificate."""
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return context
