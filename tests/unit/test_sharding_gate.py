"""A shard tenure as a write gate, and the gate that asks the tenure of a request's context.

The deadline is judged on a clock the test moves (standing in for `time.monotonic()`),
from the moment the tenure's last successful renewal was sent, as the leader's is.
"""

from __future__ import annotations

import asyncio

import pytest

from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.leader import ElectionSettings
from ome_routing.kube.sharding import (
    WRITING_FOR,
    ShardGate,
    ShardLease,
    next_turn_in,
    writing_for,
)

#: lease 15 s, renew deadline 10 s: the renew margin a write may take is 5 s
SETTINGS = ElectionSettings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def a_tenure(clock: Clock, expired: list[ShardLease] | None = None) -> ShardLease:
    return ShardLease(
        7,
        SETTINGS,
        clock.now,
        clock=clock,
        on_expired=None if expired is None else expired.append,
    )


# --- ShardLease ---------------------------------------------------------------------------


def test_a_tenure_lets_a_write_through_inside_its_renew_deadline_with_the_renew_margin() -> None:
    clock = Clock()
    tenure = a_tenure(clock)
    clock.now += SETTINGS.renew_deadline - 0.001
    assert tenure.check_write("PATCH /x") == SETTINGS.lease_duration - SETTINGS.renew_deadline


def test_a_tenure_past_its_renew_deadline_refuses_and_ends_for_good() -> None:
    clock = Clock()
    expired: list[ShardLease] = []
    tenure = a_tenure(clock, expired)
    clock.now += SETTINGS.renew_deadline
    with pytest.raises(NotLeader, match="PATCH /x: shard 7 is not held"):
        tenure.check_write("PATCH /x")
    assert tenure.ended and tenure.end_reason == "renew deadline passed before PATCH /x"
    assert expired == [tenure]  # told once
    tenure.renewed(clock.now)  # a renewal that lands late does not reopen it
    with pytest.raises(NotLeader):
        tenure.check_write("PATCH /x")
    with pytest.raises(NotLeader):
        tenure.check_read("GET /x")
    assert expired == [tenure]


def test_a_renewal_moves_the_deadline_from_when_it_was_sent() -> None:
    clock = Clock()
    tenure = a_tenure(clock)
    sent = clock.now + 8.0
    clock.now += 9.0  # the renewal's answer came a second after it was sent
    tenure.renewed(sent)
    clock.now = sent + SETTINGS.renew_deadline - 0.001
    assert tenure.may_write()
    clock.now = sent + SETTINGS.renew_deadline
    assert not tenure.may_write()


def test_an_older_renewal_does_not_move_the_deadline_back() -> None:
    clock = Clock()
    tenure = a_tenure(clock)
    tenure.renewed(clock.now + 5.0)
    tenure.renewed(clock.now + 1.0)  # answered after a later one
    clock.now += 5.0 + SETTINGS.renew_deadline - 0.001
    assert tenure.may_write()


def test_an_ended_tenure_refuses_writes_and_reads_inside_its_deadline() -> None:
    clock = Clock()
    tenure = a_tenure(clock)
    tenure.end("handed over to replica-1")
    tenure.end("again")  # idempotent
    assert tenure.end_reason == "handed over to replica-1"
    with pytest.raises(NotLeader):
        tenure.check_write("PUT /x")
    with pytest.raises(NotLeader):
        tenure.check_read("GET /x")


# --- ShardGate and writing_for ------------------------------------------------------------


def test_a_write_with_no_tenure_in_its_context_is_refused_and_a_read_passes() -> None:
    gate = ShardGate()
    with pytest.raises(NotLeader, match="no shard tenure in this request's context"):
        gate.check_write("PATCH /x")
    gate.check_read("GET /x")


def test_the_gate_asks_the_tenure_of_the_context() -> None:
    clock = Clock()
    gate, tenure = ShardGate(), a_tenure(clock)
    with writing_for(tenure):
        assert gate.check_write("PATCH /x") == 5.0
        clock.now += SETTINGS.renew_deadline
        with pytest.raises(NotLeader, match="shard 7 is not held"):
            gate.check_write("PATCH /x")
        with pytest.raises(NotLeader):
            gate.check_read("GET /x")
    assert WRITING_FOR.get() is None
    gate.check_read("GET /x")  # out of the block the ended tenure is not asked


async def test_tasks_started_for_a_tenure_carry_it_and_others_do_not() -> None:
    clock = Clock()
    gate, mine, other = (
        ShardGate(),
        a_tenure(clock),
        ShardLease(8, SETTINGS, clock.now, clock=clock),
    )
    mine.end("lost")

    async def write() -> float:
        return gate.check_write("PATCH /x")

    with writing_for(mine):
        refused = asyncio.create_task(write())
    with writing_for(other):
        allowed = asyncio.create_task(write())
    with pytest.raises(NotLeader, match="shard 7"):
        await refused
    assert await allowed == 5.0
    with pytest.raises(NotLeader, match="no shard tenure"):
        await asyncio.create_task(write())


# --- when the next turn comes -------------------------------------------------------------


def test_the_next_turn_comes_just_after_another_replicas_lease_expires_when_that_is_sooner() -> (
    None
):
    # a Lease of another replica expires in 0.7 s: the turn comes 0.75 s from now, not 2.9
    assert next_turn_in(2.9, 0.7) == pytest.approx(0.75)
    # an expiry after the retry period, or none, leaves the jittered retry period
    assert next_turn_in(2.9, 2.9) == 2.9
    assert next_turn_in(2.9, 14.0) == 2.9
    assert next_turn_in(2.9, float("inf")) == 2.9
    # an expiry already past (the clock moved on during the turn): at once, plus the margin
    assert next_turn_in(2.9, -3.0) == pytest.approx(0.05)
