"""The health prober against real loopback servers: verdicts, messages, gating, the budget."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.probes import ProbeResult, ProbeState, Restored, probe_to_json, restore
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.observer import Observer
from ome_routing.observer.polling import PollClient
from ome_routing.observer.prober import ProbeEvent, Prober

from .conftest import ConnectionHandler, Handler, Reporter, a_report, read_request_head

StartReporter = Callable[[Handler], Awaitable[Reporter]]
StartRaw = Callable[[ConnectionHandler], Awaitable[str]]

POLICY = ProbePolicy(
    path="/v1/models",
    method="GET",
    accept_statuses=(200,),
    gate_statuses=(404, 500, 502, 503, 504),
    period=Duration.parse("1s"),
    timeout=Duration.parse("300ms"),
    failure_threshold=2,
    success_threshold=2,
    all_failed_policy="PreserveTraffic",
)
#: A period long enough that a test sees one attempt only.
ONCE = replace(POLICY, period=Duration.parse("1h"))
DIGEST = "sha256:" + "0" * 64
CAPACITY = CapacityPolicy(
    path="/capacity",
    method="GET",
    format="Report",
    samples=3,
    quorum=1,
    period=Duration.parse("1h"),
    timeout=Duration.parse("5s"),
    max_age=Duration.parse("2h"),
)


class Recorder:
    """Collects the states the prober reports, and wakes a test at the n-th."""

    def __init__(self) -> None:
        self.states: list[ProbeState] = []
        self.events: list[ProbeEvent] = []
        self._arrived = asyncio.Condition()

    def on_change(self, key: object, state: ProbeState) -> None:
        self.states.append(state)
        asyncio.get_running_loop().create_task(self._notify())

    def probe_finished(self, event: ProbeEvent) -> None:
        self.events.append(event)

    async def _notify(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    async def until(self, count: int) -> ProbeState:
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.states) >= count), 10)
        return self.states[count - 1]


async def probe_once(
    client: PollClient, base: str, policy: ProbePolicy = ONCE
) -> tuple[ProbeState, Recorder]:
    recorder = Recorder()
    prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC), stats=recorder)
    await prober.start()
    try:
        prober.set_target("home", base, policy)
        state = await recorder.until(1)
    finally:
        await prober.stop()
    return state, recorder


def status(code: int, body: bytes = b"") -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(status=code, body=body)

    return answer


class TestVerdicts:
    async def test_an_accepted_status_passes(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        server = await reporter(status(200))
        state, _ = await probe_once(client, server.base)
        assert (state.result, state.message) == (ProbeResult.PASSING, "HTTP 200")
        assert server.requests[0].path == "/v1/models"
        assert server.requests[0].method == "GET"

    async def test_a_gate_status_fails(self, client: PollClient, reporter: StartReporter) -> None:
        server = await reporter(status(503))
        state, _ = await probe_once(client, server.base)
        assert (state.result, state.message, state.failures) == (
            ProbeResult.FAILING,
            "HTTP 503",
            1,
        )

    async def test_another_status_is_inconclusive(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        server = await reporter(status(429))
        state, _ = await probe_once(client, server.base)
        assert (state.result, state.message) == (
            ProbeResult.UNKNOWN,
            "HTTP 429 (not in accept or gate list)",
        )
        assert state.failures == 0 and not state.conclusive

    async def test_a_redirect_is_not_followed_and_is_inconclusive(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        async def redirect(request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound("/elsewhere")

        server = await reporter(redirect)
        state, _ = await probe_once(client, server.base)
        assert state.message == "HTTP 302 (not in accept or gate list)"
        assert [r.path for r in server.requests] == ["/v1/models"]

    async def test_a_refused_connection_fails_as_a_transport_error(
        self, client: PollClient, closed_port: int
    ) -> None:
        state, _ = await probe_once(client, f"http://127.0.0.1:{closed_port}")
        assert state.result is ProbeResult.FAILING
        assert state.message == "transport error: connection refused"

    async def test_a_stall_past_the_timeout_fails(
        self, client: PollClient, raw_server: StartRaw
    ) -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request_head(reader)
            await asyncio.sleep(30)

        base = await raw_server(silent)
        state, _ = await probe_once(client, base)
        assert state.result is ProbeResult.FAILING
        assert state.message == "transport error: timed out after 300ms"

    async def test_a_body_cut_short_fails_as_a_body_error(
        self, client: PollClient, raw_server: StartRaw
    ) -> None:
        async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request_head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
            await writer.drain()

        base = await raw_server(cut)
        state, _ = await probe_once(client, base)
        assert state.result is ProbeResult.FAILING
        assert state.message == (
            "response body error: connection closed before the body was complete"
        )

    async def test_a_body_longer_than_the_limit_still_passes(
        self, resolver: object, reporter: StartReporter
    ) -> None:
        server = await reporter(status(200, b"x" * 5000))
        async with PollClient(RequestBudget(2), 1024) as small:
            state, _ = await probe_once(small, server.base)
        assert (state.result, state.message) == (ProbeResult.PASSING, "HTTP 200")

    async def test_a_head_probe_ends_with_the_headers(
        self, client: PollClient, raw_server: StartRaw
    ) -> None:
        async def head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request_head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(30)

        base = await raw_server(head)
        state, _ = await probe_once(client, base, replace(ONCE, method="HEAD"))
        assert (state.result, state.message) == (ProbeResult.PASSING, "HTTP 200")

    async def test_no_credentials_are_sent(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        server = await reporter(status(200))
        # a timeout the loaded machine cannot reach: the verdict must be the request's
        generous = replace(ONCE, timeout=Duration.parse("30s"))
        state, _ = await probe_once(client, server.base, generous)
        assert state.result is ProbeResult.PASSING, state
        headers = server.requests[0].headers
        assert "Authorization" not in headers and "Cookie" not in headers


class TestGating:
    async def test_a_home_gates_and_reopens_as_its_answer_changes(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        answer = {"code": 503}

        async def switchable(request: web.Request) -> web.StreamResponse:
            return web.Response(status=answer["code"])

        server = await reporter(switchable)
        fast = replace(POLICY, period=Duration.parse("50ms"), timeout=Duration.parse("40ms"))
        recorder = Recorder()
        prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC))
        await prober.start()
        try:
            prober.set_target("home", server.base, fast)
            assert not (await recorder.until(1)).gated
            gated = await recorder.until(2)
            assert gated.gated and gated.failures == 2
            answer["code"] = 200
            count = len(recorder.states)
            assert (await recorder.until(count + 1)).gated  # one pass of two
            reopened = await recorder.until(count + 2)
            assert not reopened.gated and reopened.result is ProbeResult.PASSING
        finally:
            await prober.stop()

    async def test_a_restored_gate_holds_until_the_next_probe_and_it_is_not_probed_early(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        server = await reporter(status(200))
        now = datetime.now(UTC)
        stored = probe_to_json(
            ProbeState(
                observed=True,
                result=ProbeResult.FAILING,
                message="HTTP 503",
                last_probe_time=now,
                failures=3,
                gated=True,
                conclusive=True,
            ),
            DIGEST,
        )
        restored: Restored = restore(stored, now, ONCE)
        recorder = Recorder()
        prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC))
        await prober.start()
        try:
            state = prober.set_target("home", server.base, ONCE, restored)
            assert state is not None and state.gated and state.failures == 3
            await asyncio.sleep(0.2)
            assert server.requests == [] and recorder.states == []
        finally:
            await prober.stop()

    async def test_a_restored_state_with_an_old_probe_time_is_probed_at_once(
        self, client: PollClient, reporter: StartReporter
    ) -> None:
        server = await reporter(status(200))
        old = datetime.now(UTC) - timedelta(hours=2)
        restored = restore(
            {"result": "Failing", "gated": True, "lastProbeTime": old.isoformat()},
            datetime.now(UTC),
            ONCE,
        )
        recorder = Recorder()
        prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC))
        await prober.start()
        try:
            prober.set_target("home", server.base, ONCE, restored)
            state = await recorder.until(1)
            assert state.gated and state.passes == 1
        finally:
            await prober.stop()


class TestBudget:
    async def test_probes_take_slots_of_the_shared_budget(self, reporter: StartReporter) -> None:
        release = asyncio.Event()

        async def slow(request: web.Request) -> web.StreamResponse:
            await release.wait()
            return web.Response(status=200)

        server = await reporter(slow)
        budget = RequestBudget(2)
        async with PollClient(budget, 65536) as shared:
            recorder = Recorder()
            prober = Prober(
                shared, recorder.on_change, clock=lambda: datetime.now(UTC), stats=recorder
            )
            await prober.start()
            try:
                policy = replace(ONCE, timeout=Duration.parse("5s"))
                for number in range(4):
                    prober.set_target(number, server.base, policy)
                while server.in_flight < 2:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.1)
                assert budget.in_use == 2 and len(server.requests) == 2
                release.set()
                await recorder.until(4)
            finally:
                await prober.stop()
        assert server.most_in_flight == 2
        assert max(event.waited for event in recorder.events) > 0

    async def test_many_due_probes_do_not_crowd_out_a_poll(self, reporter: StartReporter) -> None:
        """Probes wait in the budget's queue no deeper than its slots, as the polls do."""

        async def answer(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(0.02)
            if request.path.endswith("/capacity"):
                return web.json_response(a_report())
            return web.Response(status=200)

        server = await reporter(answer)
        async with PollClient(RequestBudget(1), 65536) as shared:
            recorder = Recorder()
            prober = Prober(
                shared, recorder.on_change, clock=lambda: datetime.now(UTC), stats=recorder
            )
            verdicts: list[object] = []
            observer = Observer(shared, lambda key, verdict: verdicts.append(verdict))
            await prober.start()
            await observer.start()
            try:
                for number in range(60):
                    prober.set_target(number, f"{server.base}/p{number}", ONCE)
                await asyncio.sleep(0.05)  # every probe is due, and dispatched if it may be
                observer.set_home("home", server.base, CAPACITY)
                while not verdicts:
                    await asyncio.sleep(0.01)
                probed = len(recorder.states)
            finally:
                await observer.stop()
                await prober.stop()
        assert probed < 10, "the poll waited behind the probes that were due"


@pytest.mark.parametrize("endpoint", ["not a url", "ftp://host/x"])
async def test_a_home_whose_endpoint_is_not_a_usable_url_is_not_probed(
    client: PollClient, endpoint: str
) -> None:
    prober = Prober(client, lambda key, state: None, clock=lambda: datetime.now(UTC))
    assert prober.set_target("home", endpoint, ONCE) is None
    assert len(prober) == 0


async def test_homes_set_before_start_are_spread_over_their_first_period(
    client: PollClient, reporter: StartReporter
) -> None:
    """As at a controller's start: no burst of first probes that every period would repeat."""
    server = await reporter(status(200))
    recorder = Recorder()
    prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC))
    spread = replace(POLICY, period=Duration.parse("2s"))
    for number in range(20):
        prober.set_target(number, server.base, spread)
    await prober.start()
    try:
        await asyncio.sleep(0.5)
        early = len(server.requests)
        await recorder.until(20)
    finally:
        await prober.stop()
    assert 0 < early < 20


@pytest.mark.parametrize("turns", range(4))
async def test_stop_ends_the_dispatcher_even_as_a_new_home_wakes_it(
    client: PollClient, reporter: StartReporter, turns: int
) -> None:
    """A home set just before `stop` wakes the dispatcher; the cancellation that `stop`
    sends must end it whichever turn of the loop it lands in (on Python 3.11,
    `asyncio.wait_for` returned the wake-up and dropped a cancellation that came one or
    two turns after it: `stop` then waited for ever while the dispatcher went on
    probing)."""
    server = await reporter(status(200))
    recorder = Recorder()
    prober = Prober(client, recorder.on_change, clock=lambda: datetime.now(UTC))
    await prober.start()
    prober.set_target("first", server.base, ONCE)
    await recorder.until(1)  # probed once; the dispatcher now waits an hour for the next
    prober.set_target("second", server.base, ONCE)
    for _ in range(turns):
        await asyncio.sleep(0)
    stopping = asyncio.ensure_future(prober.stop())
    done, _ = await asyncio.wait({stopping}, timeout=10)
    if not done:  # a second cancellation reaches the dispatcher: let the test end
        stopping.cancel()
    assert done, f"stop() still waiting for the dispatcher after 10 s ({turns} turns)"
