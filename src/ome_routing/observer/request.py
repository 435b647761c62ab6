"""A poll's or probe's request, ready to send: where it goes, and its bytes.

Its own module so that what sends it (`flight`, `polling`'s client) and what builds it
(`polling`: URLs, methods, headers) both import it without importing each other. It is
built once for a home and sent every period; it holds no state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ome_routing.observer.transport import Origin


@dataclass(frozen=True, slots=True)
class PollRequest:
    """A request ready to send: where, with which method, and its bytes.

    The URL is kept as text (for logs and tests); what is sent is `head`.
    """

    url: str
    method: str
    #: where its connection goes
    origin: Origin
    #: the request line and headers, as sent
    head: bytes
