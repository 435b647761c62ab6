"""The digest of a capacity poll: one string that changes with any of its settings.

A home's capacity window belongs to one poll. The observer keys a home by its owner's
UID, its map, its cluster, its endpoint and this digest, so that any change of a
setting starts the home over, as OME does. The recipe is OME's, so the same poll
gives the same digest here and there: `sha256:` and the lower-case hex SHA-256 of the
compact JSON that Go's `encoding/json` writes for

    {"version":1,"path":...,"method":...,"format":...,"options":[{"key":...,"value":...}]
     or null,"periodNanoseconds":...,"timeoutNanoseconds":...,"samples":...,
     "quorum":...,"maxAgeNanoseconds":...}

with the keys in that order and the options sorted by key. Go's encoder escapes `<`,
`>` and `&` (as `\\u003c`, `\\u003e`, `\\u0026`) and U+2028 and U+2029, and writes
other text as UTF-8; `go_json_string` does the same. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re

from ome_routing.core.pollrules import CapacityPolicy

#: The recipe's version, the first key of the digested object.
DIGEST_VERSION = 1

_SURROGATE = re.compile("[\ud800-\udfff]")
_GO_HTML_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json_string(text: str) -> str:
    """A JSON string as Go's `encoding/json` writes it (HTML-safe, UTF-8, no `\\/`).

    A lone surrogate, which Go's strings cannot hold, is written as U+FFFD as Go
    writes invalid UTF-8.
    """
    text = _SURROGATE.sub("\ufffd", text)
    return json.dumps(text, ensure_ascii=False).translate(_GO_HTML_ESCAPES)


def capacity_digest_payload(policy: CapacityPolicy) -> bytes:
    """The exact bytes that are hashed: compact Go JSON, keys in the recipe's order."""
    options = (
        "null"
        if not policy.options
        else "["
        + ",".join(
            f'{{"key":{go_json_string(key)},"value":{go_json_string(value)}}}'
            for key, value in sorted(policy.options)
        )
        + "]"
    )
    text = (
        f'{{"version":{DIGEST_VERSION}'
        f',"path":{go_json_string(policy.path)}'
        f',"method":{go_json_string(policy.method)}'
        f',"format":{go_json_string(policy.format)}'
        f',"options":{options}'
        f',"periodNanoseconds":{policy.period.nanoseconds}'
        f',"timeoutNanoseconds":{policy.timeout.nanoseconds}'
        f',"samples":{policy.samples}'
        f',"quorum":{policy.quorum}'
        f',"maxAgeNanoseconds":{policy.max_age.nanoseconds}}}'
    )
    return text.encode("utf-8")


def capacity_policy_digest(policy: CapacityPolicy) -> str:
    """`sha256:` and the hex SHA-256 of the poll's payload, as OME's `policyDigest`."""
    return "sha256:" + hashlib.sha256(capacity_digest_payload(policy)).hexdigest()
