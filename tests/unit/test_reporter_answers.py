"""What the Kubernetes-backed reporter answers, from the state of its view and health rounds.

The informers' caches and liveness are set by the test; nothing here talks to an API server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from aiohttp.test_utils import make_mocked_request
from lightkube import AsyncClient
from reporter_builders import a_pod, an_isvc

from ome_routing.core.report import parse_report
from ome_routing.reporter.kubernetes import HealthSettings, KubernetesReporter
from ome_routing.reporter.view import isvc_fields, pod_fields

T0 = datetime(2026, 9, 28, 10, 0, tzinfo=UTC)
POLL = ("llm.worker-a.example.com", "/qwen3-0-6b/qwen3-0-6b/capacity")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def a_reporter(health: bool = False) -> tuple[KubernetesReporter, Clock]:
    clock = Clock()
    settings = HealthSettings("/health", timeout=0.5, period=1.0) if health else None
    reporter = KubernetesReporter(cast(AsyncClient, object()), health=settings, clock=clock)
    return reporter, clock


def listed(reporter: KubernetesReporter, isvcs: list[Any], pods: list[Any]) -> None:
    """Both informers listed these objects, told the reporter, and are watching."""
    view = reporter.view
    for isvc in isvcs:
        kept = isvc_fields(isvc)
        key = (kept["metadata"]["namespace"], kept["metadata"]["name"])
        view.isvcs.cache[key] = kept
        reporter._isvc_changed(key, None, kept)
    for pod in pods:
        kept = pod_fields(pod)
        key = (kept["metadata"]["namespace"], kept["metadata"]["name"])
        view.pods.cache[key] = kept
        reporter._pod_changed(key, None, kept)
    for informer in (view.pods, view.isvcs):
        informer.synced.set()
        informer.live = True


def deleted(reporter: KubernetesReporter, kind: str, name: str) -> None:
    """The informer of `kind` saw `name` deleted."""
    key = ("qwen3-0-6b", name)
    if kind == "pod":
        reporter._pod_changed(key, reporter.view.pods.cache.pop(key), None)
    else:
        reporter._isvc_changed(key, reporter.view.isvcs.cache.pop(key), None)


def body(reporter: KubernetesReporter) -> tuple[int, Any]:
    response = reporter.answer(*POLL)
    assert response.body is not None
    raw = cast(bytes, response.body)
    return response.status, parse_report(raw) if response.status == 200 else raw.decode()


def test_before_the_first_list_every_poll_is_503() -> None:
    reporter, _ = a_reporter()
    status, text = body(reporter)
    assert status == 503
    assert text == "the reporter has not listed the cluster's pods and InferenceServices yet"


def test_a_service_it_does_not_know_is_404() -> None:
    reporter, _ = a_reporter()
    listed(reporter, [an_isvc("other")], [])
    assert reporter.answer(*POLL).status == 404


def test_a_pod_event_changes_the_count() -> None:
    reporter, _ = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build(), a_pod("b").build()])
    assert body(reporter)[1].servable == 2
    listed(reporter, [], [a_pod("b").not_ready().build()])
    assert body(reporter)[1].servable == 1
    deleted(reporter, "pod", "a")
    assert body(reporter)[1].servable == 0


def test_a_live_view_gives_the_count_stamped_now() -> None:
    reporter, clock = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build(), a_pod("b").not_ready().build()])
    status, reading = body(reporter)
    assert status == 200
    assert (reading.servable, reading.observed_at) == (1, T0)
    clock.now = T0 + timedelta(seconds=5)
    assert body(reporter)[1].observed_at == clock.now


def test_a_broken_watch_keeps_the_last_count_and_its_stamp() -> None:
    reporter, clock = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build(), a_pod("b").build()])
    assert body(reporter)[1].servable == 2
    reporter.view.pods.live = False
    # what the cache says after the break is not served: it was never seen live
    deleted(reporter, "pod", "b")
    clock.now = T0 + timedelta(seconds=40)
    status, reading = body(reporter)
    assert (status, reading.servable, reading.observed_at) == (200, 2, T0)
    ages = reporter.metrics.exposition().decode()
    assert (
        'ome_routing_reporter_count_age_seconds{inferenceservice="qwen3-0-6b",'
        'namespace="qwen3-0-6b"} 40.0' in ages
    )


def test_a_service_never_counted_while_the_watch_is_broken_is_503() -> None:
    reporter, _ = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build()])
    reporter.view.isvcs.live = False
    status, text = body(reporter)
    assert status == 503 and text == "no count yet for qwen3-0-6b/qwen3-0-6b"


def test_with_health_checks_a_service_is_503_until_the_first_round() -> None:
    reporter, clock = a_reporter(health=True)
    listed(reporter, [an_isvc()], [a_pod("a").build(), a_pod("b").build()])
    assert reporter.answer(*POLL).status == 503
    assert reporter.health is not None
    reporter.health.results = {"uid-a": True, "uid-b": False}
    reporter.health.round_started_at = T0 - timedelta(seconds=1)
    reporter._health_changed()
    clock.now = T0 + timedelta(seconds=1)
    status, reading = body(reporter)
    assert (status, reading.servable, reading.observed_at) == (200, 1, T0 - timedelta(seconds=1))


def test_an_engine_decoder_service_reports_its_pairs() -> None:
    reporter, _ = a_reporter()
    pods = [a_pod("e1"), a_pod("e2"), a_pod("e3"), a_pod("d1").decoder(), a_pod("d2").decoder()]
    listed(reporter, [an_isvc(decoder=True)], [p.build() for p in pods])
    assert body(reporter)[1].servable == 2


def test_a_deleted_service_loses_its_count_and_metrics() -> None:
    reporter, _ = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build()])
    assert body(reporter)[0] == 200
    deleted(reporter, "isvc", "qwen3-0-6b")
    assert reporter.answer(*POLL).status == 404
    assert reporter.counts == {}
    assert "qwen3-0-6b" not in reporter.metrics.exposition().decode()


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_the_app_answers_get_and_post_and_refuses_other_methods(method: str) -> None:
    reporter, _ = a_reporter()
    listed(reporter, [an_isvc()], [a_pod("a").build()])
    app = reporter.app()
    for verb, expected in [(method, 200), ("PUT", 405)]:
        request = make_mocked_request(verb, POLL[1], headers={"Host": POLL[0]}, app=app)
        match = await app.router.resolve(request)
        response = await match.handler(request)
        assert response.status == expected
        if expected == 200:
            assert json.loads(cast(bytes, response.body))["servable"] == 1
