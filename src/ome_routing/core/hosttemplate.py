"""`endpoint.globalHostTemplate`: the global hostname of a service, as a Go template.

OME renders the template with Go's `text/template` over the data `{Name, Namespace}`.
This module reads the part of that language a hostname template needs, exactly as Go
does: literal text, and the field actions `{{ .Name }}` and `{{ .Namespace }}`, with
any spacing inside the braces and Go's trim markers (`{{- ` removes the whitespace
before the action, ` -}}` the whitespace after it). Go prints a string field as it
is, with no escaping, and the result is trimmed, as OME trims it.

Anything else Go's language offers (pipelines, functions, `if`, comments, other
fields) is refused when the controller starts, with the template in the message,
rather than rendered differently from OME.

Errors: `HostTemplateError` (a `ValueError`) names the template and the first action it
cannot render.
"""

from __future__ import annotations

from dataclasses import dataclass

from ome_routing.core.fields import go_q

__all__ = ["FIELDS", "HostTemplate", "HostTemplateError", "parse_host_template"]

#: The fields of OME's template data, by the name the template spells.
FIELDS = ("Name", "Namespace")
_SPACE = " \t\r\n"  # Go's template whitespace


class HostTemplateError(ValueError):
    """The template uses something other than text and the two field actions."""


@dataclass(frozen=True, slots=True)
class HostTemplate:
    """A parsed template: literal text and field names, in order."""

    text: str
    #: ("text", literal) or ("field", "Name" | "Namespace")
    parts: tuple[tuple[str, str], ...]

    def render(self, name: str, namespace: str) -> str:
        """The hostname for the service `namespace/name`, trimmed as OME trims it."""
        values = {"Name": name, "Namespace": namespace}
        out = [value if kind == "text" else values[value] for kind, value in self.parts]
        return "".join(out).strip(_SPACE)


def _refuse(template: str, action: str) -> HostTemplateError:
    return HostTemplateError(
        f"endpoint.globalHostTemplate {go_q(template)}: {go_q(action)} is not supported "
        "(use only {{ .Name }} and {{ .Namespace }})"
    )


def parse_host_template(raw: str) -> HostTemplate:
    """Parse the template as OME does (after trimming it); raises `HostTemplateError`."""
    template = raw.strip(_SPACE)
    parts: list[tuple[str, str]] = []
    pending = ""  # text not yet emitted, so that a `{{-` can trim it
    position = 0
    while True:
        start = template.find("{{", position)
        if start < 0:
            pending += template[position:]
            break
        pending += template[position:start]
        end = template.find("}}", start + 2)
        if end < 0:
            raise _refuse(template, template[start:])
        action = template[start : end + 2]
        inner = template[start + 2 : end]
        # Go's trim markers are "-" with whitespace on its inner side; "{{-3}}" is a number.
        if len(inner) >= 2 and inner[0] == "-" and inner[1] in _SPACE:
            pending = pending.rstrip(_SPACE)
            inner = inner[1:]
        trim_after = len(inner) >= 2 and inner[-1] == "-" and inner[-2] in _SPACE
        if trim_after:
            inner = inner[:-1]
        field = inner.strip(_SPACE)
        if not field.startswith(".") or field[1:] not in FIELDS:
            raise _refuse(template, action)
        if pending:
            parts.append(("text", pending))
        pending = ""
        parts.append(("field", field[1:]))
        position = end + 2
        if trim_after:
            while position < len(template) and template[position] in _SPACE:
                position += 1
    if pending:
        parts.append(("text", pending))
    return HostTemplate(template, tuple(parts))
