"""A cache that holds each object packed, and hands out a fresh copy on every read.

A decoded Kubernetes object in Python is a tree of dicts and lists: a TrafficMap of
three homes is some twenty dicts, about 4 KB, and the InferenceService's view a few
more. The same object packed by `marshal` (the interpreter's own serializer: C-fast,
exact for JSON values, never written anywhere) is a single bytes object of about a
third of that. Reconciles read a handful of objects each, so decoding the two they read
costs microseconds, while the cache of every map and service is held at its packed
size. Every read is a copy of its own, so no reader can change the cache by mistake.

The objects of one kind are mostly the same bytes: the same keys, conditions, reasons
and messages, with a few names, UIDs and times that differ. Each is also compressed
(raw deflate) against a preset dictionary, the packed bytes of the first object the
store held, which the store keeps for its lifetime: a TrafficMap of this kind packs to
about a quarter of its `marshal` bytes, an InferenceService's view to about an eighth,
where compressing each object on its own halves it at best. Reading one costs a few tens
of microseconds more than `marshal` alone.
"""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Iterator, MutableMapping
from typing import Any

Key = tuple[str, str]

#: Raw deflate (no header or checksum: the bytes never leave the process), 32 KiB window.
_WBITS = -15
_LEVEL = 6
_MEM_LEVEL = 9


class PackedStore(MutableMapping[Key, dict[str, Any]]):
    """key -> JSON object, each held as compressed `marshal` bytes and decoded on every read."""

    __slots__ = ("_packed", "_zdict")

    def __init__(self) -> None:
        self._packed: dict[Key, bytes] = {}
        #: the preset dictionary: the first object's `marshal` bytes (None: nothing held yet)
        self._zdict: bytes | None = None

    def __getitem__(self, key: Key) -> dict[str, Any]:
        packed = self._packed[key]
        assert self._zdict is not None
        unpacked = zlib.decompressobj(_WBITS, zdict=self._zdict).decompress(packed)
        value: dict[str, Any] = marshal.loads(unpacked)
        return value

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        unpacked = marshal.dumps(value)
        if self._zdict is None:
            self._zdict = unpacked
        pack = zlib.compressobj(
            _LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, self._zdict
        )
        self._packed[key] = pack.compress(unpacked) + pack.flush()

    def __delitem__(self, key: Key) -> None:
        del self._packed[key]

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def __iter__(self) -> Iterator[Key]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)
