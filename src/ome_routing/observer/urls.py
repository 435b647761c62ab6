"""Poll URLs built as OME builds them: Go's `net/url` parse, canonical endpoint, `JoinPath`.

OME polls `url.JoinPath(CanonicalEndpoint(endpoint), path)`. Both steps decide which
URL a home is polled at and which endpoints are the same home, so they are
reproduced here step for step:

- `parse_url`: Go's `url.Parse` for the URLs an endpoint can be: scheme, `//` and
  authority (user info, host, optional port), path, query, fragment; an opaque URL
  (`http:h`) and a relative one are parsed too, so that the checks that follow can
  refuse them. Control characters, bad `%` escapes, a bad port and a bad character in
  the host fail as Go's parser fails.
- `canonical_endpoint`: the endpoint must be absolute (`endpoint URL "..." must be
  absolute`) and http or https (`... must use HTTP or HTTPS`); the scheme and host
  are lower-cased, the fragment dropped, the escaped path cleaned as Go's `path.Clean`
  does, and a path of `.` or `/` becomes empty. The query stays, as in OME.
- `join_path`: Go's `url.JoinPath`: the escaped path of the endpoint and the poll's
  path are joined and cleaned (`..` and `.` segments resolved, repeated `/` reduced
  to one), a trailing `/` of the poll's path is kept, and the result is re-escaped.
  A path that does not unescape leaves the endpoint's path as it was, as in Go.

Errors: `URLError` (a `ValueError`) whose text is what follows OME's reason prefix
(`parse endpoint URL: ...`, `endpoint URL "..." must be absolute`, ...). Go's own
wording after `parse "...": ` is matched where this module knows it. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ome_routing.core.quoting import quote

_HEX = "0123456789ABCDEF"
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_SCHEME_REST = _ALNUM | frozenset("+-.")
_UNRESERVED = frozenset("-_.~")
#: Path characters Go leaves as they are: `$&+,/:;=@` besides the unreserved ones.
_PATH_KEEP = _ALNUM | _UNRESERVED | frozenset("$&+,/:;=@")
#: Host characters Go leaves as they are.
_HOST_KEEP = _ALNUM | _UNRESERVED | frozenset("!$&'()*+,;=:[]<>\"")
#: Characters a raw (escaped) path may hold as they are (Go's `validEncoded`).
_VALID_ENCODED = _PATH_KEEP | frozenset("!'()*[]%")


class URLError(ValueError):
    """The text is not a URL that can be polled; `str()` is the reason's detail."""


@dataclass(frozen=True, slots=True)
class GoURL:
    """The parts of a URL as Go's `url.URL` holds them (`path` unescaped)."""

    scheme: str = ""
    opaque: str = ""
    userinfo: str | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""

    def escaped_path(self) -> str:
        """The path as it is written, Go's `EscapedPath`."""
        raw = self.raw_path
        if raw and all(char in _VALID_ENCODED for char in raw):
            try:
                if _unescape(raw, host=False) == self.path:
                    return raw
            except URLError:
                pass
        if self.path == "*":
            return "*"
        return _escape(self.path, _PATH_KEEP)

    def __str__(self) -> str:
        """The URL as Go's `String` writes it."""
        out: list[str] = []
        if self.scheme:
            out.append(self.scheme + ":")
        if self.opaque:
            out.append(self.opaque)
        else:
            if self.scheme or self.host or self.userinfo is not None:
                if self.host or self.path or self.userinfo is not None:
                    out.append("//")
                if self.userinfo is not None:
                    out.append(self.userinfo + "@")
                if self.host:
                    out.append(_escape(self.host, _HOST_KEEP))
            path = self.escaped_path()
            if path and path[0] != "/" and self.host:
                out.append("/")
            out.append(path)
        if self.force_query or self.raw_query:
            out.append("?" + self.raw_query)
        if self.fragment:
            out.append("#" + (self.raw_fragment or _escape(self.fragment, _PATH_KEEP | {"?"})))
        return "".join(out)

    def with_path(self, escaped: str) -> GoURL:
        """Go's `setPath`: the URL with this escaped path (unchanged if it does not unescape)."""
        try:
            path = _unescape(escaped, host=False)
        except URLError:
            return self
        raw = "" if _escape(path, _PATH_KEEP) == escaped else escaped
        return replace(self, path=path, raw_path=raw)


def _escape(text: str, keep: frozenset[str]) -> str:
    if all(char in keep for char in text):
        return text
    out: list[str] = []
    for char in text:
        if char in keep:
            out.append(char)
        else:
            for byte in _utf8(char):
                out.append("%" + _HEX[byte >> 4] + _HEX[byte & 15])
    return "".join(out)


def _utf8(char: str) -> bytes:
    """A character's bytes; a byte that did not decode comes back as it was."""
    try:
        return char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "\ufffd".encode()


def _is_hex(char: str) -> bool:
    return char in "0123456789abcdefABCDEF"


def _unescape(text: str, *, host: bool) -> str:
    """Go's `unescape` for a path (`host=False`) or a host name."""
    if "%" not in text and not host:
        return text
    data = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%":
            code = text[i : i + 3]
            if len(code) < 3 or not (_is_hex(code[1]) and _is_hex(code[2])):
                raise URLError(f"invalid URL escape {quote(code)}")
            value = int(code[1:], 16)
            if host and value < 0x80 and code != "%25":
                raise URLError(f"invalid URL escape {quote(code)}")
            data.append(value)
            i += 3
            continue
        if host and char < "\x80" and char not in _HOST_KEEP:
            raise URLError(f"invalid character {quote(char)} in host name")
        data.extend(_utf8(char))
        i += 1
    return data.decode("utf-8", "surrogateescape")


def _valid_optional_port(port: str) -> bool:
    if port == "":
        return True
    return port[0] == ":" and all(char in "0123456789" for char in port[1:])


def _parse_host(host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise URLError("missing ']' in host")
        port = host[close + 1 :]
        if not _valid_optional_port(port):
            raise URLError(f"invalid port {quote(port)} after host")
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_optional_port(host[colon:]):
            raise URLError(f"invalid port {quote(host[colon:])} after host")
    return _unescape(host, host=True)


def _split_scheme(text: str) -> tuple[str, str]:
    for i, char in enumerate(text):
        if char in _ALNUM and (i > 0 or not char.isdigit()):
            continue
        if i > 0 and char in _SCHEME_REST:
            continue
        if char == ":":
            if i == 0:
                raise URLError("missing protocol scheme")
            return text[:i], text[i + 1 :]
        return "", text
    return "", text


def parse_url(text: str) -> GoURL:
    """Go's `url.Parse`; errors read `parse "<text>": <why>`, as Go's do."""
    try:
        return _parse(text)
    except URLError as err:
        raise URLError(f"parse {quote(text)}: {err}") from None


def _parse(text: str) -> GoURL:
    rest, hash_mark, raw_fragment = text.partition("#")
    if any(char < " " or char == "\x7f" for char in rest):
        raise URLError("net/url: invalid control character in URL")
    fragment = _unescape(raw_fragment, host=False) if hash_mark else ""
    scheme, rest = _split_scheme(rest)
    scheme = scheme.lower()
    force_query = False
    raw_query = ""
    if rest.endswith("?") and rest.count("?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, raw_query = rest.partition("?")
    fragment_parts = {
        "fragment": fragment,
        "raw_fragment": raw_fragment
        if _escape(fragment, _PATH_KEEP | {"?"}) != raw_fragment
        else "",
    }
    if not rest.startswith("/"):
        if scheme:
            return GoURL(
                scheme=scheme,
                opaque=rest,
                force_query=force_query,
                raw_query=raw_query,
                **fragment_parts,
            )
        if ":" in rest.split("/", 1)[0]:
            raise URLError("first path segment in URL cannot contain colon")
    userinfo: str | None = None
    host = ""
    if (scheme or not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, after = rest[2:].partition("/")
        rest = slash + after
        at = authority.rfind("@")
        if at >= 0:
            userinfo, authority = authority[:at], authority[at + 1 :]
        host = _parse_host(authority)
    url = GoURL(
        scheme=scheme,
        userinfo=userinfo,
        host=host,
        force_query=force_query,
        raw_query=raw_query,
        **fragment_parts,
    )
    path = _unescape(rest, host=False)
    return replace(url, path=path, raw_path="" if _escape(path, _PATH_KEEP) == rest else rest)


def clean_path(path: str) -> str:
    """Go's `path.Clean`: the shortest equivalent slash-separated path."""
    if path == "":
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(segment)
    cleaned = "/".join(parts)
    if rooted:
        return "/" + cleaned
    return cleaned or "."


def join_paths(*elements: str) -> str:
    """Go's `path.Join`: the non-empty elements joined by `/` and cleaned."""
    kept = [element for element in elements if element]
    return clean_path("/".join(kept)) if kept else ""


def canonical_endpoint(raw: str) -> GoURL:
    """OME's `CanonicalEndpoint`, as a URL: a stable identity for an absolute endpoint."""
    try:
        parsed = _parse(raw)
    except URLError as err:
        raise URLError(f"parse endpoint URL: parse {quote(raw)}: {err}") from None
    if not parsed.scheme or not parsed.host or parsed.opaque:
        raise URLError(f"endpoint URL {quote(raw)} must be absolute")
    if parsed.scheme not in ("http", "https"):
        raise URLError(f"endpoint URL {quote(raw)} must use HTTP or HTTPS")
    parsed = replace(parsed, host=parsed.host.lower(), fragment="", raw_fragment="")
    escaped = parsed.escaped_path()
    if escaped == "":
        return parsed
    escaped = clean_path(escaped)
    if escaped in (".", "/"):
        return replace(parsed, path="", raw_path="")
    try:
        decoded = _unescape(escaped, host=False)
    except URLError as err:
        raise URLError(f"parse endpoint URL path: {err}") from None
    return replace(parsed, path=decoded, raw_path=escaped)


def join_path(base: str, element: str) -> str:
    """Go's `url.JoinPath(base, element)`; errors are `url.Parse`'s of `base`."""
    url = parse_url(base)
    first = url.escaped_path()
    if first.startswith("/"):
        joined = join_paths(first, element)
    else:
        joined = join_paths("/" + first, element)[1:]
    if element.endswith("/") and not joined.endswith("/"):
        joined += "/"
    return str(url.with_path(joined))
