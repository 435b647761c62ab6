"""The reporter's TLS: a serving certificate, and optionally client certificates required.

Not OME (OME ships no reporter). The option names are Kubernetes' own, as
kube-apiserver spells them: `--tls-cert-file`, `--tls-private-key-file`, and
`--client-ca-file` (a client must present a certificate that this CA signed). The
context is the standard `ssl` module's server context (TLS 1.2 and later).

Errors: `TlsSettingError` (a `ValueError`), whose text names the option and the file.
"""

from __future__ import annotations

import ssl
from pathlib import Path

CERT_OPTION = "--tls-cert-file"
KEY_OPTION = "--tls-private-key-file"
CLIENT_CA_OPTION = "--client-ca-file"


class TlsSettingError(ValueError):
    """A TLS option that cannot be used; the text names the option and its file."""


def _reason(err: OSError) -> str:
    if isinstance(err, ssl.SSLError):
        reason = getattr(err, "reason", None)
        if isinstance(reason, str) and reason:
            return reason.replace("_", " ").lower()
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server context that presents `cert`; with `client_ca`, clients must present one too."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except OSError as err:
        raise TlsSettingError(
            f"{CERT_OPTION} {cert} and {KEY_OPTION} {key} cannot be loaded: {_reason(err)}"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except OSError as err:
            raise TlsSettingError(
                f"{CLIENT_CA_OPTION} {client_ca} cannot be loaded: {_reason(err)}"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context
