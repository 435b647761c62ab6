"""The operator's transport settings made ready: TLS context, bearer token, address rule.

Not OME (see `core.trustrules` for the settings). `prepare` reads the files once, when
the controller starts (and when `validate-config` checks a values file), and refuses
settings it cannot use, naming the field and its value. The result, `Trust`, is what the
poll client's connection pool (`observer.pool`) uses for every poll and probe:

- `ssl_context`: the default context (certificates verified, the name checked), with the
  CA bundle in place of the system store and the client certificate, when set.
- `token`: the bearer token, added to each request written on an HTTPS connection
  (never on plain HTTP, where anyone on the path would read it). Its file is looked at
  again at most once every `TOKEN_RECHECK_SECONDS` (a `stat`); when it changed (a
  Secret's atomic update gives it a new inode), it is read again. A token that cannot be
  read any more keeps the last one, with a warning in the log.
- `refusal`: why a resolved address may not be connected to (`core.trustrules.refusal`).

Errors: `TrustError` (a `ValueError`), whose text names the field and the file.
"""

from __future__ import annotations

import logging
import os
import ssl

from ome_routing.core.quoting import quote
from ome_routing.core.trustrules import (
    CA_BUNDLE_FIELD,
    CLIENT_CERT_FIELD,
    CLIENT_KEY_FIELD,
    TOKEN_FIELD,
    TrustSettings,
)
from ome_routing.core.trustrules import refusal as _refusal

log = logging.getLogger("ome_routing.observer")

#: How often, at most, the token's file is looked at for a new token.
TOKEN_RECHECK_SECONDS = 1.0


class TrustError(ValueError):
    """A transport setting that cannot be used; the text names the field and its value."""


def _os_text(err: OSError) -> str:
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]


def _ssl_text(err: ssl.SSLError) -> str:
    reason = getattr(err, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.replace("_", " ").lower()
    return str(err)


def _file_error(field: str, path: str, err: OSError) -> TrustError:
    return TrustError(f"{field} {quote(path)} cannot be read: {_os_text(err)}")


def _read_token(path: str) -> bytes:
    """The token's header line; raises `OSError` or `ValueError` (a bad token)."""
    with open(path, "rb") as stream:
        token = stream.read(65536).strip()
    if not token:
        raise ValueError("is empty")
    if any(byte < 0x21 or byte > 0x7E for byte in token):
        raise ValueError("holds a character that a header cannot carry")
    return b"Authorization: Bearer " + token + b"\r\n"


def _stamp(path: str) -> tuple[int, int, int, int]:
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


class BearerToken:
    """A token file's current `Authorization` header, re-read when the file changes."""

    __slots__ = ("_checked", "_line", "_path", "_stamp")

    def __init__(self, path: str) -> None:
        self._path = path
        try:
            self._stamp = _stamp(path)
            self._line = _read_token(path)
        except OSError as err:
            raise _file_error(TOKEN_FIELD, path, err) from None
        except ValueError as err:
            raise TrustError(f"{TOKEN_FIELD} {quote(path)} {err}") from None
        self._checked = float("-inf")

    def sign(self, head: bytes, now: float) -> bytes:
        """`head` (a request's bytes, ending in an empty line) with the token's header."""
        if now - self._checked >= TOKEN_RECHECK_SECONDS:
            self._checked = now
            self._refresh()
        return head[:-2] + self._line + b"\r\n"

    def _refresh(self) -> None:
        try:
            stamp = _stamp(self._path)
            if stamp == self._stamp:
                return
            line = _read_token(self._path)
        except (OSError, ValueError) as err:
            text = _os_text(err) if isinstance(err, OSError) else str(err)
            log.warning(
                "%s %s cannot be read again, the last token is kept: %s",
                TOKEN_FIELD,
                quote(self._path),
                text,
            )
            return
        self._stamp, self._line = stamp, line


class Trust:
    """The transport settings of one poll client, ready to use."""

    __slots__ = ("_context", "settings", "token")

    def __init__(self, settings: TrustSettings, context: ssl.SSLContext | None) -> None:
        self.settings = settings
        self._context = context
        self.token = BearerToken(settings.bearer_token_file) if settings.bearer_token_file else None

    def ssl_context(self) -> ssl.SSLContext:
        """The context for HTTPS polls; the default one when no file is set."""
        if self._context is None:
            self._context = ssl.create_default_context()
        return self._context

    @property
    def checks_addresses(self) -> bool:
        return bool(self.settings.allow or self.settings.deny)

    def refusal(self, address: str) -> str | None:
        """Why a poll may not connect to `address` (an IP address), or None."""
        return _refusal(address, self.settings)


def _context(settings: TrustSettings) -> ssl.SSLContext | None:
    if not settings.ca_bundle_file and not settings.client_cert_file:
        return None
    bundle = settings.ca_bundle_file
    try:
        # with a bundle, only it is trusted: the system store is not loaded
        context = ssl.create_default_context(cafile=bundle or None)
    except ssl.SSLError as err:  # an OSError too: first
        raise TrustError(
            f"{CA_BUNDLE_FIELD} {quote(bundle)} holds no usable CA certificate: {_ssl_text(err)}"
        ) from None
    except OSError as err:
        raise _file_error(CA_BUNDLE_FIELD, bundle, err) from None
    if bundle and not context.get_ca_certs():
        raise TrustError(f"{CA_BUNDLE_FIELD} {quote(bundle)} holds no CA certificate")
    if settings.client_cert_file:
        cert, key = settings.client_cert_file, settings.client_key_file
        for field, path in ((CLIENT_CERT_FIELD, cert), (CLIENT_KEY_FIELD, key)):
            if not os.access(path, os.R_OK):
                try:
                    open(path, "rb").close()  # for the system's own words
                except OSError as err:
                    raise _file_error(field, path, err) from None
        try:
            context.load_cert_chain(cert, key)
        except ssl.SSLError as err:
            raise TrustError(
                f"{CLIENT_CERT_FIELD} {quote(cert)} and {CLIENT_KEY_FIELD} {quote(key)} "
                f"are not a certificate and its key: {_ssl_text(err)}"
            ) from None
        except OSError as err:
            raise _file_error(CLIENT_CERT_FIELD, cert, err) from None
    return context


def prepare(settings: TrustSettings) -> Trust | None:
    """The settings ready to use, or None when none is set (OME's client); `TrustError`."""
    if settings.default:
        return None
    return Trust(settings, _context(settings))
