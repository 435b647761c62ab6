"""Keys and certificates for one local control plane, made with the `openssl` command.

One CA signs the API server's serving certificate (127.0.0.1, ::1, localhost, and the names
and address pods reach it by through the `kubernetes` Service) and an admin client
certificate in the group `system:masters`; a separate key signs service-account tokens.
`sign_client` adds a client certificate for another user (a node's components). All keys
are ECDSA P-256: quick to generate and accepted by every consumer here. Nothing leaves the
directory it is written to.

Errors: `PkiError` (openssl is missing or failed; the message quotes its output).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_DAYS = "30"
#: The `kubernetes` Service's ClusterIP: the first address of the control plane's
#: --service-cluster-ip-range (10.0.0.0/24), which in-cluster clients connect to.
KUBERNETES_SERVICE_IP = "10.0.0.1"
_SERVING_SANS = ",".join(
    (
        "IP:127.0.0.1",
        "IP:::1",
        f"IP:{KUBERNETES_SERVICE_IP}",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    )
)


class PkiError(RuntimeError):
    """A key or certificate could not be made."""


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files in a control plane's cert directory."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public_key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> Pki:
        """Where make_pki() writes (or wrote) its files in `directory`."""
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            admin_cert=directory / "admin.crt",
            admin_key=directory / "admin.key",
            service_account_key=directory / "service-account.key",
            service_account_public_key=directory / "service-account.pub",
        )


def make_pki(directory: Path) -> Pki:
    """Write a fresh CA, serving and admin certificates and a service-account key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PkiError(
            "openssl is not on PATH; it is needed to make the control plane's certificates"
        )
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    pki = Pki.in_directory(directory)
    run = _Runner(openssl, directory)
    for key in (pki.ca_key, pki.serving_key, pki.admin_key, pki.service_account_key):
        run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
    run(
        "pkey",
        "-in",
        str(pki.service_account_key),
        "-pubout",
        "-out",
        str(pki.service_account_public_key),
    )
    run(
        "req", "-x509", "-new", "-key", str(pki.ca_key), "-out", str(pki.ca_cert),
        "-days", _DAYS, "-subj", "/CN=ome-routing-local-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _sign(
        run, pki, pki.serving_key, pki.serving_cert, "/CN=kube-apiserver",
        f"extendedKeyUsage=serverAuth\nsubjectAltName={_SERVING_SANS}\n",
    )  # fmt: skip
    _sign(
        run, pki, pki.admin_key, pki.admin_cert, "/O=system:masters/CN=admin",
        "extendedKeyUsage=clientAuth\n",
    )  # fmt: skip
    return pki


def sign_client(pki: Pki, name: str, subject: str) -> tuple[Path, Path]:
    """A new key and a client certificate for `subject` (such as `/O=system:nodes/CN=...`),
    signed by the CA, written as `name.crt` and `name.key` beside it: (certificate, key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PkiError(f"openssl is not on PATH; it is needed to make {name}'s certificate")
    directory = pki.ca_cert.parent
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    run = _Runner(openssl, directory)
    run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
    _sign(run, pki, key, cert, subject, "extendedKeyUsage=clientAuth\n")
    return cert, key


def _sign(run: _Runner, pki: Pki, key: Path, cert: Path, subject: str, extensions: str) -> None:
    request = cert.with_suffix(".csr")
    extfile = cert.with_suffix(".ext")
    extfile.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        + extensions
    )
    run("req", "-new", "-key", str(key), "-subj", subject, "-out", str(request))
    run(
        "x509", "-req", "-in", str(request), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
        "-CAcreateserial", "-days", _DAYS, "-extfile", str(extfile), "-out", str(cert),
    )  # fmt: skip
    request.unlink()
    extfile.unlink()


@dataclass(frozen=True)
class _Runner:
    openssl: str
    cwd: Path

    def __call__(self, *args: str) -> None:
        result = subprocess.run(
            [self.openssl, *args], cwd=self.cwd, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise PkiError(f"openssl {args[0]} failed: {result.stderr.strip()}")
