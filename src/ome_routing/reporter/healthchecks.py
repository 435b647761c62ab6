"""Health checks of the model servers behind a service's Ready pods, in rounds.

With `--health-path`, a pod counts only while its model server answers that path with a
2xx within `--health-timeout`. Checks run in rounds: one round checks every candidate pod
(Ready, not terminating, with an address) concurrently, at most `concurrency` at once,
and a round starts at most once every `period`, however slow the last one was, so a pod
is never checked more often than that. A round's results replace the last round's whole;
a pod it did not check (it became Ready since) does not count until the next round.

A round needs a live view of the pods; while the view is broken it is skipped, so the
last completed round's start, the stamp of the figures that use it, stops moving.

Requests go to `http://<pod IP>:<port><path>` with no credentials, no proxy and no
redirects followed: a 3xx is a failure, as for OME's probes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum

import aiohttp

log = logging.getLogger(__name__)


class CheckResult(Enum):
    """A health check's outcome, as the metrics label it."""

    PASSED = "passed"
    #: an answer other than 2xx
    FAILED = "failed"
    #: no answer within the timeout, or no connection
    UNREACHABLE = "unreachable"


#: The pods to check (uid -> `host:port`), or None while the view of pods is not live.
Targets = Callable[[], Mapping[str, str] | None]


class HealthChecks:
    """Runs the rounds, and keeps the last completed round's results and start."""

    def __init__(
        self,
        path: str,
        *,
        timeout: float,
        period: float,
        concurrency: int,
        clock: Callable[[], datetime],
        on_result: Callable[[CheckResult], None] = lambda _: None,
        on_round: Callable[[], None] = lambda: None,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"health path {path!r} must start with /")
        self.path = path
        self.timeout = timeout
        self.period = period
        self._limit = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._on_result = on_result
        self._on_round = on_round
        #: uid -> passed, from the last completed round
        self.results: dict[str, bool] = {}
        #: when the last completed round started; None before the first
        self.round_started_at: datetime | None = None

    async def run(self, targets: Targets) -> None:
        """Check in rounds until cancelled."""
        loop = asyncio.get_running_loop()
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
            while True:
                started = loop.time()
                await self.round(session, targets)
                await asyncio.sleep(max(0.0, started + self.period - loop.time()))

    async def round(self, session: aiohttp.ClientSession, targets: Targets) -> bool:
        """One round; False when it was skipped because the view is not live."""
        started_at = self._clock()
        pods = targets()
        if pods is None:
            return False
        uids = list(pods)
        outcomes = await asyncio.gather(*(self._check(session, pods[uid]) for uid in uids))
        self.results = {
            uid: outcome is CheckResult.PASSED for uid, outcome in zip(uids, outcomes, strict=False)
        }
        self.round_started_at = started_at
        self._on_round()
        return True

    async def _check(self, session: aiohttp.ClientSession, address: str) -> CheckResult:
        async with self._limit:
            result = await self._request(session, f"http://{address}{self.path}")
        self._on_result(result)
        return result

    async def _request(self, session: aiohttp.ClientSession, url: str) -> CheckResult:
        try:
            async with session.get(
                url,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                return CheckResult.PASSED if 200 <= response.status < 300 else CheckResult.FAILED
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            log.debug("health check of %s: %s", url, err)
            return CheckResult.UNREACHABLE
