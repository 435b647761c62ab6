"""`kubectl ome get trafficmaps`: OME's columns, aliases and read errors; the table renderer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubectl_builders import NOW, a_condition, a_trafficmap, an_entry

from ome_routing.kubectl import trafficmaps
from ome_routing.kubectl.gotext import bounded_cell, go_json, go_yaml, sanitize
from ome_routing.kubectl.objects import read_trafficmap
from ome_routing.kubectl.read_errors import classify, read_error
from ome_routing.kubectl.table import render_fields, render_table


def a_map(**changes: object) -> dict[str, object]:
    tmap = a_trafficmap(an_entry("gpu-a", 80), an_entry("gpu-b", 0, healthy=False), name="checkout")
    tmap["metadata"].update(changes)  # type: ignore[attr-defined]
    return tmap


def values(tmap: dict[str, object], wide: bool = True) -> dict[str, str]:
    headers, rows = trafficmaps.rows([read_trafficmap(tmap)], NOW, wide=wide, namespaces=False)
    return dict(zip(headers, rows[0], strict=True))


class TestColumns:
    @pytest.mark.parametrize("name", ["trafficmaps", "trafficmap", "tm", "tmap", "TMAP"])
    def test_every_alias_resolves(self, name: str) -> None:
        assert trafficmaps.resolve(name) == "trafficmaps"

    def test_an_unknown_resource_names_the_valid_ones(self) -> None:
        with pytest.raises(
            trafficmaps.UnknownResource,
            match=r'^unknown resource "isvc" \(valid resources: trafficmaps\)$',
        ):
            trafficmaps.resolve("isvc")

    def test_current_conditions_show_their_status_and_reasons(self) -> None:
        assert values(a_map()) == {
            "NAME": "checkout",
            "MODE": "All",
            "TARGETS": "2",
            "ROUTABLE": "True",
            "PUBLISHED": "True",
            "AGE": "3h",
            "SERVICE": "checkout",
            "ACTIVE": "1",
            "HEALTHY": "1",
            "OVERRIDE": "False",
            "OVERRIDE-REASON": "NoOverrides",
            "REASON": "Routable",
            "GATEWAY": "gateway.networking.k8s.io/HTTPRoute:prod/checkout",
            "PUBLISHER-FRESHNESS": "Current",
        }

    def test_stale_conditions_read_unknown(self) -> None:
        got = values(a_map(generation=5))
        assert (got["ROUTABLE"], got["PUBLISHED"], got["OVERRIDE"]) == ("Unknown",) * 3
        assert (got["OVERRIDE-REASON"], got["REASON"]) == ("-", "-")
        assert got["PUBLISHER-FRESHNESS"] == "Stale"

    def test_a_map_without_status_is_unobserved(self) -> None:
        tmap = a_map()
        tmap["status"] = {}
        got = values(tmap)
        assert (got["ROUTABLE"], got["GATEWAY"], got["PUBLISHER-FRESHNESS"]) == (
            "Unknown",
            "-",
            "Unobserved",
        )

    def test_the_compact_table_has_omes_six_columns(self) -> None:
        """OME's `kubectl ome get trafficmaps` columns, spelled out as OME prints them."""
        assert list(values(a_map(), wide=False)) == [
            "NAME",
            "MODE",
            "TARGETS",
            "ROUTABLE",
            "PUBLISHED",
            "AGE",
        ]

    def test_the_wide_table_adds_omes_eight_columns_after_them(self) -> None:
        headers, _ = trafficmaps.rows([read_trafficmap(a_map())], NOW, wide=True, namespaces=False)
        assert headers == [
            "NAME",
            "MODE",
            "TARGETS",
            "ROUTABLE",
            "PUBLISHED",
            "AGE",
            "SERVICE",
            "ACTIVE",
            "HEALTHY",
            "OVERRIDE",
            "OVERRIDE-REASON",
            "REASON",
            "GATEWAY",
            "PUBLISHER-FRESHNESS",
        ]

    def test_all_namespaces_adds_the_namespace_first(self) -> None:
        headers, rows = trafficmaps.rows(
            [read_trafficmap(a_map())], NOW, wide=False, namespaces=True
        )
        assert headers[:2] == ["NAMESPACE", "NAME"]
        assert rows[0][:2] == ["prod", "checkout"]

    def test_a_condition_of_an_older_generation_is_not_current(self) -> None:
        tmap = a_map()
        tmap["status"]["conditions"] = [a_condition("Routable", "False", "AllHomesUnready", 3)]  # type: ignore[index]
        assert values(tmap)["ROUTABLE"] == "Unknown"

    @pytest.mark.parametrize(
        ("seconds", "shown"),
        [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (150, "2m30s"),
            (3600, "60m"),
            (4 * 3600 + 60, "4h1m"),
            (3 * 86400, "3d"),
        ],
    )
    def test_ages_read_as_kubectl_shows_them(self, seconds: int, shown: str) -> None:
        assert trafficmaps.human_duration(timedelta(seconds=seconds).total_seconds()) == shown


class TestReadErrors:
    def test_a_forbidden_get_names_the_object_and_nothing_else(self) -> None:
        failure = classify("Forbidden", 403, {"message": "publisher rejected Bearer xoxb-secret"})
        assert read_error("get", "trafficmaps", "team-a", "checkout", failure) == (
            "get trafficmaps team-a/checkout: Forbidden"
        )

    def test_a_404_without_a_name_is_the_missing_api(self) -> None:
        failure = classify("NotFound", 404, {"details": {}})
        assert read_error("list", "trafficmaps", "prod", "", failure) == (
            "list trafficmaps prod: OMEAPIMissing (install OME first)"
        )

    def test_a_timeout_is_timed_out(self) -> None:
        assert classify("Timeout", 0, {}) == ("TimedOut", "")


class TestText:
    def test_a_table_pads_columns_by_three_and_trims_line_ends(self) -> None:
        assert render_table(("A", "BB"), [["x", ""], ["long", "y"]]) == "A      BB\nx\nlong   y\n"

    def test_a_value_cannot_forge_a_row(self) -> None:
        assert (
            render_fields([("Route home", "a\nInjected   row")])
            .splitlines()[1]
            .endswith("a\\nInjected   row")
        )

    def test_cells_are_cut_with_an_ellipsis(self) -> None:
        assert bounded_cell("TrafficMap Returned", 18) == "TrafficMap Retu..."
        assert bounded_cell("x" * 56, 56) == "x" * 56

    def test_credential_shaped_text_is_redacted(self) -> None:
        assert sanitize("token: abcdefgh", 80) == "[REDACTED]"
        assert sanitize("worker-a", 80) == "worker-a"

    def test_json_escapes_html_as_go_does(self) -> None:
        assert go_json({"a": "<&>"}) == '{\n  "a": "\\u003c\\u0026\\u003e"\n}\n'

    def test_yaml_sorts_keys_and_quotes_with_double_quotes(self) -> None:
        assert go_yaml({"b": "", "a": "2026-09-15T12:00:00Z", "c": []}) == (
            'a: "2026-09-15T12:00:00Z"\nb: ""\nc: []\n'
        )
