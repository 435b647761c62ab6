"""The publisher on a real API server with the Gateway API CRDs: routes, backends, status.

The first test follows the guide "Publish a global endpoint" (the service `chat`,
`{{ .Name }}.{{ .Namespace }}.global.example.com`, rewriteHostname) and checks OME's
objects exactly; the others cover a weight change, an all-zero table, withdrawal,
deletion, ownership and hostname refusals, and our hostname-EndpointSlice mode.
"""

from __future__ import annotations

import uuid

import pytest
import yaml
from controller_harness import ControllerProcess, condition, eventually, get_map
from publisher_harness import (
    GUIDE_PUBLISHED,
    GUIDE_ROUTE,
    Scene,
    gateway_api,
    labels,
    scene,
    values,
)

from ome_routing.core.publication import backend_service_name

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(240)


async def test_the_guide_publishes_a_route_and_externalname_services(scene: Scene) -> None:
    """Step 1's route and Step 2's condition, with OME's objects exactly."""
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 2, "worker-b": 2})
    await scene.start(values())
    tmap = await scene.published("chat")

    assert await scene.kubectl("get", "httproute", "chat-global", "-n", ns, *GUIDE_ROUTE) == (
        f"chat.{ns}.global.example.com gateway-system/global\n"
        f"chat.{ns}.worker-a.example.com weight=1\n"
        f"chat.{ns}.worker-b.example.com weight=1\n"
    )
    assert await scene.kubectl("get", "trafficmap", "chat", "-n", ns, *GUIDE_PUBLISHED) == (
        'True Published: TrafficMap is published by publisher "gatewayapi"\n'
    )
    route = await scene.get("httproute", "chat-global")
    assert route is not None
    assert route["metadata"]["labels"] == labels(ns, "chat")
    a, b = (backend_service_name(ns, "chat", c) for c in ("worker-a", "worker-b"))
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "global",
            "namespace": "gateway-system",
        }
    ]
    assert route["spec"]["rules"][0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert [
        (r["name"], r["namespace"], r["port"], r["kind"])
        for r in route["spec"]["rules"][0]["backendRefs"]
    ] == [(a, ns, 80, "Service"), (b, ns, 80, "Service")]
    for service_name, cluster in ((a, "worker-a"), (b, "worker-b")):
        service = await scene.get("service", service_name)
        assert service is not None
        assert service["metadata"]["labels"] == labels(ns, "chat", cluster)
        assert service["spec"]["type"] == "ExternalName"
        assert service["spec"]["externalName"] == f"chat.{ns}.{cluster}.example.com"
        assert [p["port"] for p in service["spec"]["ports"]] == [80]

    status = tmap["status"]
    assert status["published"] is True
    assert status["gatewayRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "HTTPRoute",
        "namespace": ns,
        "name": "chat-global",
    }
    assert status["publisher"]["publisherName"] == "gatewayapi"
    assert status["publisher"]["claimedTargets"] == [f"v1:httproute:{ns}/chat-global"]
    assert status["observedTrafficMapGeneration"] == tmap["metadata"]["generation"]
    assert "ome.io/trafficmap-publisher" in tmap["metadata"]["finalizers"]
    fallback = condition(tmap, "PublicationFallback")
    assert (fallback["status"], fallback["reason"]) == ("False", "Unsupported")


async def test_weights_follow_the_map_and_an_all_zero_table_is_kept(scene: Scene) -> None:
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    await scene.start(values())
    await scene.published("chat")
    await scene.weights("chat", [2, 1])

    await scene.place("chat", {"worker-a": 3, "worker-b": 3})
    await scene.weights("chat", [1, 1])

    await scene.place("chat", {"worker-a": 0, "worker-b": 0})
    route = await scene.weights("chat", [0, 0])
    assert len(route["spec"]["rules"][0]["backendRefs"]) == 2
    tmap = await get_map(scene.plane, "chat", scene.namespace)
    assert condition(tmap, "Published")["reason"] == "Published"


async def test_removing_the_global_host_withdraws_the_route_and_its_services(
    scene: Scene,
) -> None:
    """With no template, only the annotation names a host; without it, the map is withdrawn."""
    host = "chat.global.example.com"
    await scene.service("chat", {"worker-a": 1}, {"ome.io/global-host": host})
    await scene.start(values(globalHostTemplate=""))
    await scene.published("chat")
    route = await scene.get("httproute", "chat-global")
    assert route is not None and route["spec"]["hostnames"] == [host]
    service = backend_service_name(scene.namespace, "chat", "worker-a")

    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", scene.namespace, "ome.io/global-host-"
    )
    tmap = await scene.published("chat", "Withdrawn")
    published = condition(tmap, "Published")
    assert (published["status"], published["message"]) == (
        "False",
        'TrafficMap publication is withdrawn by publisher "gatewayapi"',
    )
    fallback = condition(tmap, "PublicationFallback")
    assert (fallback["status"], fallback["reason"], fallback["message"]) == (
        "False",
        "Withdrawn",
        "TrafficMap publication is withdrawn",
    )
    assert "published" not in tmap["status"] and "gatewayRef" not in tmap["status"]
    assert await scene.get("httproute", "chat-global") is None
    assert await scene.get("service", service) is None


async def test_a_service_that_stops_routing_leaves_nothing_behind(scene: Scene) -> None:
    """The guide's clean-up: the map goes only after the publisher removed its objects."""
    await scene.service("chat", {"worker-a": 1, "worker-b": 1})
    await scene.start(values())
    await scene.published("chat")
    await scene.kubectl(
        "patch", "inferenceservice", "chat", "-n", scene.namespace, "--type=merge",
        "-p", '{"spec": {"routing": {"enabled": false}}}',
    )  # fmt: skip

    async def gone() -> bool:
        return await get_map(scene.plane, "chat", scene.namespace) is None

    await eventually(gone, what="the TrafficMap to be deleted")
    out = await scene.kubectl("get", "httproute", "chat-global", "-n", scene.namespace, check=False)
    assert 'httproutes.gateway.networking.k8s.io "chat-global" not found' in out
    services = await scene.kubectl(
        "get", "services", "-n", scene.namespace, "-l", "ome.io/placement-endpoint-isvc=chat",
        "-o", "name",
    )  # fmt: skip
    assert services == ""


async def test_an_object_of_another_source_at_a_backend_name_is_refused(scene: Scene) -> None:
    ns = scene.namespace
    taken = backend_service_name(ns, "chat", "worker-a")
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": taken, "namespace": ns},
        "spec": {"type": "ExternalName", "externalName": "elsewhere.example.com"},
    }
    await scene.kubectl("apply", "-f", "-", input=yaml.safe_dump(foreign))
    await scene.service("chat", {"worker-a": 1})
    process = await scene.start(values())
    tmap = await scene.published("chat", "ClaimRejected")
    published = condition(tmap, "Published")
    assert (published["status"], published["message"]) == (
        "False",
        "Publisher claims could not be acquired",
    )
    assert condition(tmap, "PublicationFallback")["status"] == "Unknown"
    assert await scene.get("httproute", "chat-global") is None
    service = await scene.get("service", taken)
    assert service is not None and service["spec"]["externalName"] == "elsewhere.example.com"
    assert "TrafficMap publisher reconciliation failed" in process.log
    assert f"global backend Service {ns}/{taken} belongs to another source" in process.log


async def test_a_hostname_published_by_another_route_on_the_gateway_is_refused(
    scene: Scene,
) -> None:
    ns = scene.namespace
    other = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "hand-made", "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "global", "namespace": "gateway-system"}],
            "hostnames": [f"chat.{ns}.global.example.com"],
        },
    }
    await scene.kubectl("apply", "-f", "-", input=yaml.safe_dump(other))
    await scene.service("chat", {"worker-a": 1})
    process = await scene.start(values())
    await scene.published("chat", "ClaimRejected")
    assert await scene.get("httproute", "chat-global") is None
    # the log's fields are JSON, so the quotes around the hostname are escaped
    assert (
        f'Gateway hostname \\"chat.{ns}.global.example.com\\" on gateway-system/global is '
        f"already published by HTTPRoute {ns}/hand-made"
    ) in process.log

    await scene.kubectl("delete", "httproute", "hand-made", "-n", ns)
    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", ns, "retry=1"
    )  # any change of the service retries at once
    await scene.published("chat")


async def test_hostname_endpointslice_mode_writes_selectorless_services_and_fqdn_slices(
    scene: Scene,
) -> None:
    """Ours: a Service with the port `http` and an FQDN EndpointSlice holding the home's host."""
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    await scene.start(
        values(gatewayBackend={"rewriteHostname": True, "hostnameEndpointSlices": True})
    )
    await scene.published("chat")
    await scene.weights("chat", [2, 1])
    for cluster in ("worker-a", "worker-b"):
        name = backend_service_name(ns, "chat", cluster)
        service = await scene.get("service", name)
        assert service is not None
        assert service["spec"]["type"] == "ClusterIP"
        assert "selector" not in service["spec"]
        assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("http", 80)]
        slice_ = await scene.get("endpointslice", f"{name}-fqdn")
        assert slice_ is not None
        assert slice_["addressType"] == "FQDN"
        assert slice_["endpoints"][0]["addresses"] == [f"chat.{ns}.{cluster}.example.com"]
        assert [(p["name"], p["port"]) for p in slice_["ports"]] == [("http", 80)]
        assert slice_["metadata"]["labels"] == {
            **labels(ns, "chat", cluster),
            "kubernetes.io/service-name": name,
            "endpointslice.kubernetes.io/managed-by": "placement-endpoint",
        }

    await scene.place("chat", {"worker-a": 2})
    await scene.weights("chat", [1])
    gone = backend_service_name(ns, "chat", "worker-b")
    assert await scene.get("endpointslice", f"{gone}-fqdn") is None
    assert await scene.get("service", gone) is None


async def test_with_routing_off_the_publisher_still_cleans_up_a_deleted_map(scene: Scene) -> None:
    """OME's publisher is inactive while routing is off: it only finalizes deleted maps."""
    await scene.service("chat", {"worker-a": 1})
    process = await scene.start(values())
    await scene.published("chat")
    await process.stop()
    off = values()
    off["ome"]["multicluster"]["config"]["routing"]["enabled"] = False
    inactive = ControllerProcess(
        scene.kubeconfig, off, scene.workdir, lease=f"off-{uuid.uuid4().hex[:6]}"
    )
    scene.controllers.append(inactive.start())

    async def started() -> bool:
        return "TrafficMap publisher started" in inactive.log

    await eventually(started, what="the inactive publisher to start")
    tmap = await get_map(scene.plane, "chat", scene.namespace)
    assert condition(tmap, "Published")["reason"] == "Published"  # not withdrawn by an inactive one

    await scene.kubectl("delete", "trafficmap", "chat", "-n", scene.namespace, "--wait=false")

    async def gone() -> bool:
        return await get_map(scene.plane, "chat", scene.namespace) is None

    await eventually(gone, what="the TrafficMap's finalizer to be removed")
    assert await scene.get("httproute", "chat-global") is None
