"""Kubernetes' label and name rules, failing in the API machinery's exact words.

OME compiles `spec.placement.clusterAffinity` with `labels.NewRequirement` and checks
WorkloadCluster names with `validation.IsDNS1123Subdomain`, and its messages embed
their errors. The texts here are those of `k8s.io/apimachinery` v0.35, the line OME's
go.mod pins: label keys and values are measured by `api/validate/content` ("must be no
more than 63 bytes"), names by `util/validation` ("... 253 characters"); both count
bytes of UTF-8, as Go's `len` does.

`requirement_error` is `NewRequirement`'s error as Go prints it: each problem as a
`field.Error` (`key: Invalid value: "a b": ...`), duplicates dropped, and more than one
shown as `[first, second]` (`ErrorList.ToAggregate`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ome_routing.core.digests import go_json_string
from ome_routing.core.quoting import quote

__all__ = ["OPERATORS", "dns1123_subdomain_problems", "requirement_error"]

#: The operators OME maps onto label selection (node-selector names, as users write them).
OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})

_KEY_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FORMAT = f"({_KEY_FORMAT})?"
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FORMAT = _LABEL + "(\\." + _LABEL + ")*"
_KEY = re.compile(_KEY_FORMAT)
_VALUE = re.compile(_VALUE_FORMAT)
_SUBDOMAIN = re.compile(_SUBDOMAIN_FORMAT)
_INTEGER = re.compile("[+-]?[0-9]+")  # strconv.ParseInt(s, 10, 64), before its range check

_INT64 = range(-(2**63), 2**63)


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError: the examples each followed by `', '`, joined by ` or `."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


_KEY_RULE = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character",
    _KEY_FORMAT,
    "MyName",
    "my.name",
    "123-abc",
)
_VALUE_RULE = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    _VALUE_FORMAT,
    "MyValue",
    "my_value",
    "12345",
)
_SUBDOMAIN_RULE = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character",
    _SUBDOMAIN_FORMAT,
    "example.com",
)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _subdomain_problems(value: str, unit: str) -> list[str]:
    problems = [f"must be no more than 253 {unit}"] if _size(value) > 253 else []
    if _SUBDOMAIN.fullmatch(value) is None:
        problems.append(_SUBDOMAIN_RULE)
    return problems


def dns1123_subdomain_problems(value: str) -> list[str]:
    """`validation.IsDNS1123Subdomain`: what is wrong with a WorkloadCluster name."""
    return _subdomain_problems(value, "characters")


def _label_key_problems(key: str) -> list[str]:
    """`content.IsLabelKey`: an optional DNS subdomain prefix and `/`, then a name."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            f"a valid label key {_KEY_RULE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += ["prefix part " + p for p in _subdomain_problems(prefix, "bytes")]
    if not name:
        problems.append("name part must be non-empty")
    elif _size(name) > 63:
        problems.append("name part must be no more than 63 bytes")
    if _KEY.fullmatch(name) is None:
        problems.append("name part " + _KEY_RULE)
    return problems


def _label_value_problems(value: str) -> list[str]:
    """`content.IsLabelValue`."""
    problems = ["must be no more than 63 bytes"] if _size(value) > 63 else []
    if _VALUE.fullmatch(value) is None:
        problems.append(_VALUE_RULE)
    return problems


def _invalid(field: str, shown: str, detail: str) -> str:
    """`field.Invalid(...).Error()`: the path, the value as Go shows it, the detail."""
    return f"{field}: Invalid value: {shown}: {detail}"


def _json_list(values: Sequence[str] | None) -> str:
    """`json.Marshal` of a `[]string`: `null` for a nil slice."""
    if values is None:
        return "null"
    return "[" + ",".join(go_json_string(value) for value in values) + "]"


def _is_int64(text: str) -> bool:
    if _INTEGER.fullmatch(text) is None:
        return False
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # beyond int64 (and kept short of int()'s digit limit)
        return False
    return (-int(digits) if text[0] == "-" else int(digits)) in _INT64


def requirement_error(key: str, operator: str, values: Sequence[str] | None) -> str | None:
    """`labels.NewRequirement(key, op, values)`'s error text, or None when it accepts them.

    `operator` is one of `OPERATORS`; `values` None is a nil slice (absent or null in
    JSON), which Go shows as `null`, an empty list `[]`.
    """
    if operator not in OPERATORS:
        raise ValueError(f"operator {quote(operator)} is not a label selection operator")
    count = 0 if values is None else len(values)
    listed = values or ()
    errors: list[str] = []
    key_problems = _label_key_problems(key)
    if key_problems:
        errors.append(_invalid("key", quote(key), "; ".join(key_problems)))
    if operator in ("In", "NotIn") and count == 0:
        errors.append(
            _invalid(
                "values",
                _json_list(values),
                "for 'in', 'notin' operators, values set can't be empty",
            )
        )
    elif operator in ("Exists", "DoesNotExist") and count != 0:
        errors.append(
            _invalid(
                "values",
                _json_list(values),
                "values set must be empty for exists and does not exist",
            )
        )
    elif operator in ("Gt", "Lt"):
        if count != 1:
            errors.append(
                _invalid(
                    "values",
                    _json_list(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                )
            )
        errors += [
            _invalid(
                f"values[{index}]",
                quote(value),
                "for 'Gt', 'Lt' operators, the value must be an integer",
            )
            for index, value in enumerate(listed)
            if not _is_int64(value)
        ]
    for index, value in enumerate(listed):
        value_problems = _label_value_problems(value)
        if value_problems:
            errors.append(
                _invalid(f"values[{index}][{key}]", quote(value), "; ".join(value_problems))
            )
    unique = list(dict.fromkeys(errors))
    if not unique:
        return None
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"
