"""URLs as Go's `net/url.Parse` reads them, for the addresses OME's CLI reports.

An InferenceService's `status.url`, a placement endpoint and a TrafficMap entry's
`endpoint` are Go `*apis.URL`s: decoding fails (the object is unreadable) when
`url.Parse` refuses the text. `address` is OME's projection of one: only its origin
(scheme, lower-cased host, port) and whether it has a path, or `NotRecorded` /
`InvalidEndpoint`. The full URL is never reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ome_routing.core.names import dns1123_subdomain_problems, is_ip
from ome_routing.kubectl.gotext import safe_text, sanitize

__all__ = ["GoURL", "URLError", "address", "parse_url", "path_unescape"]

_HEX = "0123456789abcdefABCDEF"
_UNRESERVED_HOST = set("!$&'()*+,;=:[]<>\"-_.~")


class URLError(ValueError):
    """Text that Go's `url.Parse` refuses."""


@dataclass(frozen=True, slots=True)
class GoURL:
    scheme: str = ""
    opaque: str = ""
    username: str | None = None
    password: str | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    omit_host: bool = False
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""

    def hostname(self) -> str:
        host, _ = _split_host_port(self.host)
        return host

    def port(self) -> str:
        return _split_host_port(self.host)[1]


def _split_host_port(hostport: str) -> tuple[str, str]:
    host, port = hostport, ""
    colon = host.rfind(":")
    if colon != -1 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _valid_optional_port(port: str) -> bool:
    if port == "":
        return True
    if port[0] != ":":
        return False
    return all("0" <= ch <= "9" for ch in port[1:])


def _unescape(text: str, host: bool) -> str:
    out = bytearray()
    i = 0
    raw = text.encode("utf-8", "surrogatepass")
    while i < len(raw):
        byte = raw[i]
        if byte == 0x25:  # %
            chunk = raw[i + 1 : i + 3].decode("latin-1")
            if len(chunk) < 2 or chunk[0] not in _HEX or chunk[1] not in _HEX:
                raise URLError("invalid URL escape")
            out.append(int(chunk, 16))
            i += 3
            continue
        if host and byte < 0x80:
            char = chr(byte)
            if not (char.isalnum() or char in _UNRESERVED_HOST):
                raise URLError("invalid character in host name")
        out.append(byte)
        i += 1
    return out.decode("utf-8", "surrogateescape")


def path_unescape(text: str) -> str:
    """Go's `url.PathUnescape`: `%XX` decoded; a malformed escape raises `URLError`."""
    return _unescape(text, host=False)


def _escaped_path_is_default(path: str, raw: str) -> bool:
    safe = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~$&+,/:;=@")
    encoded = "".join(
        ch if ch in safe else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape"))
        for ch in path
    )
    return encoded == raw


def _scheme(raw: str) -> tuple[str, str]:
    for i, char in enumerate(raw):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if i == 0:
                return "", raw
            continue
        if char == ":":
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return "", raw
    return "", raw


def parse_url(raw: str) -> GoURL:
    """Go's `url.Parse`; raises `URLError` where Go returns an error."""
    fields: dict[str, Any] = {}
    rest, hash_mark, fragment = raw.partition("#")
    if hash_mark:
        fields["fragment"] = _unescape(fragment, host=False)
        if fragment != fields["fragment"]:
            fields["raw_fragment"] = fragment
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in rest):
        raise URLError("invalid control character in URL")
    if rest == "":
        return GoURL(**fields)
    scheme, rest = _scheme(rest)
    fields["scheme"] = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        fields["force_query"] = True
        rest = rest[:-1]
    else:
        rest, _, fields["raw_query"] = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            fields["opaque"] = rest
            return GoURL(**fields)
        segment = rest.split("/", 1)[0]
        if ":" in segment:
            raise URLError("first path segment in URL cannot contain colon")
    if (scheme or not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        at = authority.rfind("@")
        hostport = authority[at + 1 :]
        if at >= 0:
            userinfo = authority[:at]
            user, colon, password = userinfo.partition(":")
            fields["username"] = _unescape(user, host=False)
            if colon:
                fields["password"] = _unescape(password, host=False)
        fields["host"] = _parse_host(hostport)
    elif scheme and rest.startswith("/"):
        fields["omit_host"] = True
    fields["path"] = _unescape(rest, host=False)
    if not _escaped_path_is_default(fields["path"], rest):
        fields["raw_path"] = rest
    return GoURL(**fields)


def _parse_host(host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise URLError("missing ']' in host")
        if not _valid_optional_port(host[close + 1 :]):
            raise URLError("invalid port after host")
    else:
        colon = host.rfind(":")
        if colon != -1 and not _valid_optional_port(host[colon:]):
            raise URLError("invalid port after host")
    return _unescape(host, host=True)


def _reported() -> dict[str, Any]:
    return {
        "evidence": "Reported",
        "freshness": "Unverifiable",
        "reason": "NoObservationGeneration",
    }


def _string(url: GoURL) -> str:
    """Enough of `URL.String()` to parse the URL again."""
    out = f"{url.scheme}:" if url.scheme else ""
    if url.opaque:
        return out + url.opaque
    if url.host or url.username is not None or url.scheme:
        out += "//"
        if url.username is not None:
            out += url.username + (f":{url.password}" if url.password is not None else "") + "@"
        out += url.host
    out += url.raw_path or url.path
    if url.force_query or url.raw_query:
        out += "?" + url.raw_query
    if url.fragment:
        out += "#" + (url.raw_fragment or url.fragment)
    return out


def _invalid_parts(url: GoURL) -> bool:
    parts = [url.scheme, url.opaque, url.host, url.path, url.raw_path, url.raw_query]
    parts += [url.fragment, url.raw_fragment]
    if url.username is not None:
        parts.append(url.username)
        if url.password is not None:
            parts.append(url.password)
    total = 0
    for part in parts:
        total += len(part.encode("utf-8", "surrogateescape"))
        if total > 4096 or not safe_text(part, 4096, True) or "\\" in part:
            return True
    return False


def address(url: GoURL | None) -> dict[str, Any]:
    """OME's `PlacementAddress` of a URL: its origin and whether it has a path."""
    out: dict[str, Any] = {"state": "NotRecorded", "pathPresent": False, "source": _reported()}
    if url is None:
        return out
    out["state"] = "InvalidEndpoint"
    if _invalid_parts(url):
        return out
    if url.opaque or url.omit_host or url.scheme not in ("http", "https") or not url.host:
        return out
    if url.raw_path and _unescape_or_none(url.raw_path) != url.path:
        return out
    if url.raw_fragment and _unescape_or_none(url.raw_fragment) != url.fragment:
        return out
    if _unescape_or_none(url.raw_query.replace("+", " ")) is None:
        return out
    if url.path and not url.path.startswith("/"):
        return out
    try:
        parsed = parse_url(_string(url))
    except URLError:
        return out
    if not parsed.host:
        return out
    host = parsed.hostname()
    if sanitize(host, 253) != host or not host or any(ch in host for ch in "%/@?# "):
        return out
    if not is_ip(host) and (
        ":" in host or dns1123_subdomain_problems(host.removesuffix(".").lower())
    ):
        return out
    port = parsed.port()
    if parsed.host.endswith(":"):
        return out
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return out
    shown = f"[{host}]" if ":" in host else host.lower()
    if port:
        shown += ":" + port
    return {
        "state": "Present",
        "endpointOrigin": f"{url.scheme}://{shown}",
        "pathPresent": bool(url.path or url.raw_path),
        "source": _reported(),
    }


def _unescape_or_none(text: str) -> str | None:
    try:
        return _unescape(text, host=False)
    except URLError:
        return None
