"""`endpoint.globalHostTemplate`: Go text/template over `.Name` and `.Namespace`, nothing else."""

from __future__ import annotations

import pytest

from ome_routing.core.hosttemplate import HostTemplateError, parse_host_template


@pytest.mark.parametrize(
    ("template", "host"),
    [
        ("{{ .Name }}.{{ .Namespace }}.global.example.com", "chat.prod.global.example.com"),
        ("{{.Name}}.{{.Namespace}}.global.example.com", "chat.prod.global.example.com"),
        ("{{\t.Name\n}}-x.example.com", "chat-x.example.com"),
        ("static.example.com", "static.example.com"),
        ("  {{ .Name }}.example.com \n", "chat.example.com"),
        ("{{ .Name }} . {{- .Namespace }}", "chat .prod"),
        ("{{ .Name -}} . {{ .Namespace }}", "chat. prod"),
        ("{{ .Name -}}  .  {{- .Namespace }}", "chat.prod"),
        ("{{ .Name }}}}.x", "chat}}.x"),
    ],
)
def test_field_actions_and_trim_markers_render_as_go_does(template: str, host: str) -> None:
    assert parse_host_template(template).render("chat", "prod") == host


def test_a_dash_without_a_space_is_not_a_trim_marker() -> None:
    """In Go, `{{-3}}` is the number -3, not a trim marker: refused here."""
    with pytest.raises(HostTemplateError):
        parse_host_template("a {{-3}}")


@pytest.mark.parametrize(
    ("template", "action"),
    [
        ("{{ .Labels }}.example.com", "{{ .Labels }}"),
        ("{{ .Name | lower }}.example.com", "{{ .Name | lower }}"),
        ('{{ printf "%s" .Name }}', '{{ printf "%s" .Name }}'),
        ("{{ if .Name }}x{{ end }}", "{{ if .Name }}"),
        ("{{/* note */}}x", "{{/* note */}}"),
        ("{{ .name }}", "{{ .name }}"),
        ("{{ .Name.Foo }}", "{{ .Name.Foo }}"),
        ("{{ .Name", "{{ .Name"),
        ("{{ }}", "{{ }}"),
    ],
)
def test_anything_else_is_refused_naming_the_template_and_the_action(
    template: str, action: str
) -> None:
    with pytest.raises(HostTemplateError) as raised:
        parse_host_template(template)
    quoted_action = action.replace('"', '\\"')
    assert str(raised.value).startswith("endpoint.globalHostTemplate ")
    assert (
        f'"{quoted_action}" is not supported (use only {{{{ .Name }}}} and {{{{ .Namespace }}}})'
        in str(raised.value)
    )
