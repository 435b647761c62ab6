"""A cache that holds each object packed, and hands out a fresh copy on every read.

A decoded Kubernetes object in Python is a tree of dicts and lists: a TrafficMap of
three homes is some twenty dicts, about 4 KB, and the InferenceService's view a few
more. The same object packed by `marshal` (the interpreter's own serializer: C-fast,
exact for JSON values, never written anywhere) is a single bytes object of about a
third of that. Reconciles read a handful of objects each, so decoding the two they read
costs microseconds, while the cache of every map and service is held at its packed
size. Every read is a copy of its own, so no reader can change the cache by mistake.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator, MutableMapping
from typing import Any

Key = tuple[str, str]


class PackedStore(MutableMapping[Key, dict[str, Any]]):
    """key -> JSON object, each held as `marshal` bytes and decoded on every read."""

    __slots__ = ("_packed",)

    def __init__(self) -> None:
        self._packed: dict[Key, bytes] = {}

    def __getitem__(self, key: Key) -> dict[str, Any]:
        value: dict[str, Any] = marshal.loads(self._packed[key])
        return value

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        self._packed[key] = marshal.dumps(value)

    def __delitem__(self, key: Key) -> None:
        del self._packed[key]

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def __iter__(self) -> Iterator[Key]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)
