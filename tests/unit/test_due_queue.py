"""The observer's schedule: items come out earliest first, wherever they were kept."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.observer.scheduling import DueQueue


def drain(queue: DueQueue[str], now: float = float("inf")) -> list[str]:
    taken: list[str] = []
    while (item := queue.pop_due(now)) is not None:
        taken.append(item)
    return taken


def test_an_empty_queue_has_nothing_due() -> None:
    queue: DueQueue[str] = DueQueue()
    assert queue.first_due() is None
    assert queue.pop_due(1e9) is None
    assert len(queue) == 0


def test_nothing_comes_out_before_it_is_due() -> None:
    queue: DueQueue[str] = DueQueue()
    queue.push("later", 5.0, lane=1.0)
    queue.push("first poll", 3.0)
    assert queue.first_due() == 3.0
    assert queue.pop_due(2.9) is None
    assert queue.pop_due(3.0) == "first poll"
    assert queue.pop_due(4.0) is None
    assert queue.pop_due(5.0) == "later"


def test_a_push_out_of_order_in_its_lane_still_comes_out_in_order() -> None:
    queue: DueQueue[str] = DueQueue()
    queue.push("b", 2.0, lane=10.0)
    queue.push("a", 1.0, lane=10.0)  # earlier than the lane's last: kept apart
    queue.push("c", 1.5, lane="late")
    assert len(queue) == 3
    assert drain(queue) == ["a", "c", "b"]


def test_lanes_past_the_limit_share_the_heap() -> None:
    queue: DueQueue[int] = DueQueue(max_lanes=2)
    for lane in range(5):
        queue.push(lane, float(5 - lane), lane=lane)
    assert [queue.pop_due(10.0) for _ in range(5)] == [4, 3, 2, 1, 0]


def test_clear_empties_every_lane_and_the_heap() -> None:
    queue: DueQueue[str] = DueQueue()
    queue.push("a", 1.0, lane=1.0)
    queue.push("b", 0.5)
    queue.clear()
    assert len(queue) == 0 and queue.first_due() is None


pushes = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=100, allow_nan=False),
        st.sampled_from([None, 1.0, 10.0, "late"]),
    ),
    max_size=60,
)


@settings(max_examples=200)
@given(pushes, st.floats(min_value=0, max_value=100, allow_nan=False))
def test_items_come_out_in_due_order_and_only_when_due(
    pushed: list[tuple[float, float | str | None]], now: float
) -> None:
    queue: DueQueue[tuple[float, int]] = DueQueue(max_lanes=2)
    for index, (due, lane) in enumerate(pushed):
        queue.push((due, index), due, lane)
    out: list[tuple[float, int]] = []
    while (item := queue.pop_due(now)) is not None:
        out.append(item)
    dues = [due for due, _ in out]
    assert dues == sorted(dues)
    assert all(due <= now for due in dues)
    assert len(out) == sum(1 for due, _ in pushed if due <= now)
    rest = queue.first_due()
    assert rest is None or rest > now


def test_a_push_a_little_out_of_order_takes_its_place_in_the_lane() -> None:
    queue: DueQueue[str] = DueQueue()
    for name, due in (("a", 1.0), ("b", 2.0), ("d", 4.0), ("e", 5.0)):
        queue.push(name, due, lane=10.0)
    queue.push("c", 3.0, lane=10.0)  # as a poll that ended after two that went out later
    queue.push("b2", 2.0, lane=10.0)  # after the one it ties with, as it came later
    assert drain(queue, now=4.5) == ["a", "b", "b2", "c", "d"]
    assert drain(queue) == ["e"]


def test_a_push_far_out_of_order_still_comes_out_in_order() -> None:
    queue: DueQueue[int] = DueQueue()
    for index in range(1, 201):
        queue.push(index, float(index), lane=10.0)
    queue.push(0, 0.5, lane=10.0)  # before every one of them, 200 from the lane's end
    queue.push(150, 150.0, lane=10.0)
    assert queue.first_due() == 0.5
    assert drain(queue) == [0, *range(1, 151), 150, *range(151, 201)]


# the pushes of polls that end out of the order they went out in: mostly in order, with
# runs of up to a few hundred (longer than the stretch of a lane searched for a place)
steady_pushes = st.lists(
    st.tuples(st.integers(min_value=-300, max_value=20), st.sampled_from([1.0, "late"])),
    min_size=1,
    max_size=400,
)


@settings(max_examples=200)
@given(steady_pushes)
def test_pushes_near_each_other_come_out_in_due_order(
    steps: list[tuple[int, float | str]],
) -> None:
    queue: DueQueue[tuple[float, int]] = DueQueue()
    due = 1000.0
    for index, (step, lane) in enumerate(steps):
        due += step / 10  # back by as much as 30, forward by as much as 2
        queue.push((due, index), due, lane)
    out = drain(queue)  # type: ignore[arg-type]
    assert len(out) == len(steps)
    assert [due for due, _ in out] == sorted(due for due, _ in out)
    # those of one lane due at once come out in the order they came
    for lane in (1.0, "late"):
        mine = [item for item in out if steps[item[1]][1] == lane]
        assert mine == sorted(mine)
