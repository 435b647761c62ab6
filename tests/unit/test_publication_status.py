"""The publisher's status: OME's conditions per situation, its journal, and what it leaves alone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ome_routing.core.endpoint import EndpointConfig
from ome_routing.core.publication import Publication, Source, plan_publication
from ome_routing.core.publication_objects import route_spec, service_body
from ome_routing.core.publication_status import (
    FINALIZING,
    OPTIONS_DIGEST,
    PUBLISHED_OK,
    STATE_REMOVED,
    TRANSITIONING,
    UNPUBLISHED,
    WITHDRAWN,
    Outcome,
    Reason,
    failure,
    needs_finalizer,
    publisher_status,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def pair(outcome: Outcome) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    p, f = outcome.published, outcome.fallback
    return (p.status, p.reason, p.message), (f.status, f.reason, f.message)


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (
            TRANSITIONING,
            (
                ("False", "Transitioning", "TrafficMap publisher is applying the current plan"),
                ("Unknown", "Transitioning", "TrafficMap publisher is applying the current plan"),
            ),
        ),
        (
            PUBLISHED_OK,
            (
                ("True", "Published", 'TrafficMap is published by publisher "gatewayapi"'),
                (
                    "False",
                    "Unsupported",
                    "The selected publisher does not retain publication plans",
                ),
            ),
        ),
        (
            WITHDRAWN,
            (
                (
                    "False",
                    "Withdrawn",
                    'TrafficMap publication is withdrawn by publisher "gatewayapi"',
                ),
                ("False", "Withdrawn", "TrafficMap publication is withdrawn"),
            ),
        ),
        (
            UNPUBLISHED,
            (
                (
                    "False",
                    "Unpublished",
                    "TrafficMap source is deleting or has opted out of publication",
                ),
                ("False", "Unpublished", "TrafficMap publication fallback is inactive"),
            ),
        ),
        (
            FINALIZING,
            (
                ("False", "Finalizing", "TrafficMap publisher is removing external state"),
                ("False", "Finalizing", "TrafficMap publisher is removing external state"),
            ),
        ),
        (
            STATE_REMOVED,
            (
                ("False", "Unpublished", "TrafficMap publisher state is removed"),
                ("False", "Finalizing", "TrafficMap publication fallback is finalized"),
            ),
        ),
    ],
)
def test_each_situation_has_omes_conditions(outcome: Outcome, expected: Any) -> None:
    assert pair(outcome) == expected


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (Reason.INVALID_OWNER, "TrafficMap owner identity is invalid or stale"),
        (Reason.INVALID_OPTIONS, "Publisher options are invalid"),
        (Reason.INVALID_PLAN, "Publisher plan is invalid"),
        (Reason.CLAIM_REJECTED, "Publisher claims could not be acquired"),
        (Reason.DRAIN_FAILED, "Publisher could not drain stale targets"),
        (Reason.APPLY_FAILED, "Publisher could not apply the TrafficMap"),
        (Reason.PUBLISHER_CHANGED, "Publisher journal does not match the selected publisher"),
        (Reason.FINALIZING, "TrafficMap publisher reconciliation failed"),
    ],
)
def test_a_failure_carries_the_generic_message_of_its_reason(reason: Reason, message: str) -> None:
    assert pair(failure(reason)) == (("False", reason, message), ("Unknown", reason, message))


def test_the_options_digest_is_omes() -> None:
    assert OPTIONS_DIGEST == (
        "sha256:984ffbfda2c12f0d2649869b385fa543a8bc1f93091cb0becc27e2c00dabcb60"
    )


ROUTABLE = {
    "type": "Routable",
    "status": "True",
    "observedGeneration": 3,
    "lastTransitionTime": "2026-01-01T00:00:00Z",
    "reason": "Routable",
    "message": "x",
}


def test_the_journal_and_success_keep_the_routing_controllers_keys() -> None:
    old = {"sourceUID": "u", "conditions": [ROUTABLE]}
    claimed = publisher_status(old, 4, TRANSITIONING, NOW, claims=["v1:httproute:prod/chat-global"])
    assert claimed["sourceUID"] == "u" and claimed["conditions"][0] == ROUTABLE
    assert claimed["publisher"] == {
        "publisherName": "gatewayapi",
        "claimedTargets": ["v1:httproute:prod/chat-global"],
        "observedOptionsDigest": OPTIONS_DIGEST,
    }
    ref = {
        "group": "gateway.networking.k8s.io",
        "kind": "HTTPRoute",
        "namespace": "prod",
        "name": "chat-global",
    }
    done = publisher_status(
        claimed, 4, PUBLISHED_OK, NOW, gateway_ref=ref, published=True, observed=True
    )
    assert done["published"] is True and done["gatewayRef"] == ref
    assert done["observedTrafficMapGeneration"] == 4
    assert done["publisher"] == claimed["publisher"]
    assert [c["type"] for c in done["conditions"]] == [
        "Routable",
        "Published",
        "PublicationFallback",
    ]


def test_a_failure_keeps_the_last_successs_gateway_ref_and_generation() -> None:
    old = {
        "published": True,
        "gatewayRef": {"kind": "HTTPRoute", "name": "chat-global"},
        "observedTrafficMapGeneration": 2,
    }
    failed = publisher_status(old, 3, failure(Reason.APPLY_FAILED), NOW)
    assert failed["gatewayRef"] == old["gatewayRef"]
    assert failed["observedTrafficMapGeneration"] == 2


def test_the_state_removed_clears_the_journal_and_the_ref() -> None:
    old = {
        "published": True,
        "gatewayRef": {"kind": "HTTPRoute"},
        "publisher": {"publisherName": "gatewayapi"},
    }
    removed = publisher_status(
        old, 3, STATE_REMOVED, NOW, claims=None, gateway_ref=None, published=False
    )
    assert "published" not in removed and "gatewayRef" not in removed and "publisher" not in removed


def test_nothing_changes_when_the_outcome_is_the_same() -> None:
    once = publisher_status({}, 1, WITHDRAWN, NOW, published=False, observed=True)
    twice = publisher_status(
        once, 1, WITHDRAWN, NOW.replace(hour=9), published=False, observed=True
    )
    assert twice == once


class TestObjects:
    """The bodies written for OME's default mode and for the hostname-EndpointSlice mode."""

    CONFIG = EndpointConfig(global_gateway="global", backend_port=8080)

    def plan(self, config: EndpointConfig) -> Publication:
        spec = {
            "service": "chat",
            "entries": [{"cluster": "a", "endpoint": "http://h.example.com/", "weight": 0}],
        }
        return plan_publication(
            Source("prod", "chat", {"ome.io/global-host": "g.example.com"}),
            "prod",
            "chat",
            spec,
            config,
        )

    def test_a_bare_gateway_name_has_no_parent_namespace_and_no_rewrite_by_default(self) -> None:
        spec = route_spec(self.CONFIG, self.plan(self.CONFIG))
        assert spec["parentRefs"] == [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "global"}
        ]
        ref = spec["rules"][0]["backendRefs"][0]
        assert "filters" not in ref and ref["weight"] == 0 and ref["port"] == 8080

    def test_the_default_backend_is_an_externalname_service(self) -> None:
        plan = self.plan(self.CONFIG)
        body = service_body(self.CONFIG, plan, ("prod", "chat"), plan.backends[0])
        assert body["spec"]["type"] == "ExternalName"
        assert body["spec"]["externalName"] == "h.example.com"
        assert body["spec"]["ports"] == [{"port": 8080, "protocol": "TCP", "targetPort": 8080}]

    def test_the_hostname_mode_backend_is_selectorless_with_a_named_port(self) -> None:
        config = EndpointConfig(
            global_gateway="global", backend_port=8080, hostname_endpoint_slices=True
        )
        plan = self.plan(config)
        body = service_body(config, plan, ("prod", "chat"), plan.backends[0])
        assert body["spec"]["type"] == "ClusterIP" and "selector" not in body["spec"]
        assert "externalName" not in body["spec"]
        assert body["spec"]["ports"] == [
            {"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}
        ]


@pytest.mark.parametrize(
    "status",
    [
        {"publisher": {"publisherName": "gatewayapi", "claimedTargets": ["ns/route"]}},
        {"publisher": {"publisherName": "gatewayapi"}},
        {"published": True},
        {"gatewayRef": {"kind": "HTTPRoute", "namespace": "ns", "name": "route"}},
        {"observedTrafficMapGeneration": 2},
    ],
)
def test_recorded_publisher_state_needs_the_finalizer(status: dict[str, Any]) -> None:
    """OME's `publisherStatusNeedsFinalizer` for a stateful publisher
    (TestTrafficMapPublisherRepairsFinalizerBeforeRejectingExistingClaims: claims;
    TestStatefulTrafficMapPublisherRepairsFinalizerForZeroClaimState: a journal with no
    claims and `published`)."""
    assert needs_finalizer({"sourceUID": "u", **status})


def test_a_map_without_publisher_state_needs_no_finalizer() -> None:
    routing_only = {"sourceUID": "u", "conditions": [{"type": "Routable", "status": "True"}]}
    assert not needs_finalizer(routing_only)
    assert not needs_finalizer({})
