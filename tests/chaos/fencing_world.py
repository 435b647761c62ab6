"""Two replicas on one Lease, the publisher on, and every write accounted for to its writer.

`Pair` sets up a fencing test: the Gateway API CRDs, routed services whose homes are the
fleet's reporters (named `localhost`, as the publisher takes only host names), a leader
and a standby that each reach the API server through a `relay.Relay` of their own, and
the two watches that see every write (`fleet.recorder` for the TrafficMaps,
`published.PublishedRecorder` for the routes, Services and slices). `account(fault)`
matches every change the watches saw to the request that made it in the API server's
audit log (`audit`) and says what the old leader wrote once the standby had begun to.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from audit import WATCHED, Request, read_audit
from controller_harness import ControllerProcess, eventually
from fleet import Fleet
from published import PublishedRecorder
from relay import Relay, kubeconfig_through

from ome_routing_dev.devcluster.gateway_tools import install_gateway_api_crds

#: the publisher's settings: routes on a made-up Gateway, one global host per service
ENDPOINT = {
    "globalGateway": "gateway-system/global",
    "backendPort": 80,
    "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
}
OLD_SOURCE, NEW_SOURCE = "127.0.0.2", "127.0.0.3"
UNANSWERED = "5xx"
Figure = Callable[[str, object], None]


async def _true(value: bool) -> bool:
    return value


@dataclass
class Account:
    """What the audit log and the watches say about the writes around a fault."""

    fault: float  # wall clock
    requests: list[Request]
    #: changes the watches saw from the standby's first write on, and who made each
    watched_after: list[tuple[str, str]] = field(default_factory=list)

    def writes(self, source: str) -> list[Request]:
        return [r for r in self.requests if r.source == source and r.kind != "Lease"]

    @property
    def watched_by_old(self) -> list[str]:
        return [change for change, author in self.watched_after if author.startswith(OLD_SOURCE)]

    @property
    def watched_unknown(self) -> list[str]:
        return [change for change, author in self.watched_after if author == "unknown"]

    @property
    def standby_first(self) -> Request | None:
        return next((r for r in self.writes(NEW_SOURCE) if r.succeeded), None)

    @property
    def old_last(self) -> Request | None:
        done = [r for r in self.writes(OLD_SOURCE) if r.succeeded]
        return done[-1] if done else None

    @property
    def old_after_standby(self) -> list[Request]:
        """The old leader's writes that took effect after the standby's first."""
        first = self.standby_first
        if first is None:
            return []
        return [r for r in self.writes(OLD_SOURCE) if r.succeeded and r.at > first.at]

    @property
    def old_refused_after_standby(self) -> list[Request]:
        """The old leader's writes that reached the API server after the standby's first
        write and were refused (409: the resourceVersion fence; 504: the sender was gone)."""
        first = self.standby_first
        if first is None:
            return []
        return [r for r in self.writes(OLD_SOURCE) if not r.succeeded and r.at > first.at]

    def record(self, name: str, figure: Figure) -> None:
        first, last = self.standby_first, self.old_last
        if last is not None:
            figure(f"{name}: fault to old leader's last write (s)", last.at - self.fault)
        if first is not None:
            figure(f"{name}: fault to standby's first write (s)", first.at - self.fault)
        figure(
            f"{name}: old leader's writes after the standby's first", len(self.old_after_standby)
        )
        figure(
            f"{name}: old leader's writes the watches saw after the standby's first",
            len(self.watched_by_old),
        )
        refused = Counter(
            f"{r.verb} {r.kind}{'/status' if r.subresource else ''} {r.code}"
            for r in self.old_refused_after_standby
        )
        figure(
            f"{name}: old leader's writes refused after the standby's first",
            ", ".join(f"{k} x{n}" for k, n in sorted(refused.items())) or "0",
        )
        figure(
            f"{name}: changes the watches saw after the standby's first", len(self.watched_after)
        )


@dataclass
class Pair:
    fleet: Fleet
    audit_log: Path
    services: int
    timing: tuple[str, ...]
    old: ControllerProcess | None = None
    new: ControllerProcess | None = None
    old_link: Relay | None = None
    new_link: Relay | None = None
    published: PublishedRecorder | None = None

    # -- setting up ---------------------------------------------------------------------

    async def start(self) -> None:
        fleet = self.fleet
        plane = fleet.plane
        await asyncio.to_thread(install_gateway_api_crds, plane.kubectl, plane.wait_established)
        self.published = await PublishedRecorder(fleet.client).__aenter__()
        homes = {c: r.url.replace("127.0.0.1", "localhost") for c, r in fleet.reporters.items()}
        for index in range(self.services):
            name = f"svc-{index:03d}"
            await fleet.create_service(name, homes)
            fleet.services.append(name)
        upstream = ("127.0.0.1", plane.ports["kube-apiserver"])
        self.old_link = await Relay(upstream, OLD_SOURCE).start()
        self.new_link = await Relay(upstream, NEW_SOURCE).start()
        self.old = await self._replica("leader", self.old_link, wait=True)
        self.new = await self._replica("standby", self.new_link, wait=False)
        await fleet.until_correct()
        await eventually(
            lambda: _true(self.routes() == {f"{s}-global" for s in fleet.services}),
            60,
            "every service's route to be published",
        )
        assert await fleet.lease_holder() == "leader"

    async def _replica(self, identity: str, link: Relay, *, wait: bool) -> ControllerProcess:
        kubeconfig = kubeconfig_through(
            self.fleet.plane.kubeconfig, link, self.fleet.workdir / f"kubeconfig-{identity}"
        )
        return await self.fleet.start_controller(
            identity, wait=wait, endpoint=ENDPOINT, kubeconfig=kubeconfig, args=self.timing
        )

    async def close(self) -> None:
        if self.published is not None:
            await self.published.__aexit__()
        for link in (self.old_link, self.new_link):
            if link is not None:
                link.heal()
                await link.close()

    def routes(self) -> set[str]:
        assert self.published is not None
        return {key.split("/")[1] for key in self.published.names("HTTPRoute")}

    # -- the load: every map rewritten all the time -------------------------------------

    @contextlib.asynccontextmanager
    async def flapping(self) -> AsyncIterator[None]:
        """worker-a's count flips between 1 and 2, so every map and route is rewritten."""
        fleet = self.fleet
        fleet.recorder.rises_allowed = True
        reporter = fleet.reporters["worker-a"]

        async def flip() -> None:
            while True:
                reporter.servable = 3 - reporter.servable
                await asyncio.sleep(0.4)

        task = asyncio.create_task(flip())
        try:
            await eventually(
                lambda: _true(self.old_writes_since(time.time() - 2) >= self.services),
                60,
                "the leader to be writing maps all the time",
            )
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def old_writes_since(self, moment: float) -> int:
        return sum(
            1
            for r in read_audit(self.audit_log)
            if r.source == OLD_SOURCE and r.kind == "TrafficMap" and r.succeeded and r.at >= moment
        )

    # -- the takeover -------------------------------------------------------------------

    async def standby_rewrote_everything(self, fault: float, timeout: float = 120) -> None:
        """Wait until the standby leads and has written every map and every route since."""
        wanted = {("TrafficMap", s) for s in self.fleet.services}
        wanted |= {("HTTPRoute", f"{s}-global") for s in self.fleet.services}

        async def done() -> bool:
            written = {
                (r.kind, r.name)
                for r in read_audit(self.audit_log)
                if r.source == NEW_SOURCE and r.succeeded and r.at > fault
            }
            return wanted <= written

        await eventually(done, timeout, "the standby to write every map and route")

    async def exit_of(self, process: ControllerProcess, timeout: float) -> int | None:
        """The process's exit code once it ends, or None if it runs on for `timeout` s."""
        assert process.process is not None
        with contextlib.suppress(Exception):
            return await asyncio.to_thread(process.process.wait, timeout)
        return None

    async def settle(self) -> None:
        """Wait until no write has landed for 2 s and the watches have caught up."""

        async def quiet() -> bool:
            requests = read_audit(self.audit_log)
            latest = max((r.at for r in requests if r.kind != "Lease"), default=0.0)
            return time.time() - latest > 2.0

        await eventually(quiet, 60, "the writes in flight to land")
        await asyncio.sleep(1.0)

    # -- accounting ---------------------------------------------------------------------

    def account(self, fault: float) -> Account:
        requests = read_audit(self.audit_log)
        result = Account(fault, requests)
        first = result.standby_first
        if first is None or first.resource_version is None:
            return result
        start = int(first.resource_version)
        authors = {
            (r.kind, r.name, r.resource_version): r.source
            for r in requests
            if r.resource_version is not None
        }
        deletes = [r for r in requests if r.verb == "delete" and r.succeeded]
        # a request answered 5xx may still have been written: the API server answers 504
        # when its client has gone (a request delivered after the partition healed), and the
        # write can land all the same; such a change is that request's writer's
        unanswered = [r for r in requests if r.code >= 500 and r.kind in WATCHED.values()]
        assert self.published is not None
        seen = [
            ("TrafficMap", "MODIFIED", w.name, w.resource_version)
            for w in self.fleet.recorder.writes
        ] + [(c.kind, c.type, c.name, c.resource_version) for c in self.published.changes]
        for kind, event, name, version in seen:
            if int(version) < start or kind not in WATCHED.values():
                continue
            if event == "DELETED":
                author = next(
                    (r.source for r in reversed(deletes) if (r.kind, r.name) == (kind, name)),
                    "unknown",
                )
            else:
                author = authors.get((kind, name, version), "")
            if author in ("", "unknown"):
                maybe = {r.source for r in unanswered if (r.kind, r.name) == (kind, name)}
                author = f"{maybe.pop()} (answered {UNANSWERED})" if len(maybe) == 1 else "unknown"
            result.watched_after.append((f"{event} {kind} {name} @{version}", author))
        return result
