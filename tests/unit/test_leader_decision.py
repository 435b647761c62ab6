"""Who may take a Lease: judged on the local clock from when the Lease last changed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ome_routing.kube.leader import ElectionSettings, Observation, lease_is_free

STAMP = datetime(2026, 11, 29, tzinfo=UTC)


def test_a_lease_nobody_holds_is_free() -> None:
    assert lease_is_free(None, "me", now=0.0, duration=15)
    assert lease_is_free(Observation(None, None, 100.0), "me", now=100.0, duration=15)
    assert lease_is_free(Observation("", None, 100.0), "me", now=100.0, duration=15)


def test_our_own_lease_is_always_ours_to_renew() -> None:
    assert lease_is_free(Observation("me", STAMP, 100.0), "me", now=100.0, duration=15)


@pytest.mark.parametrize(
    ("now", "free"), [(100.0, False), (114.9, False), (115.0, True), (500.0, True)]
)
def test_anothers_lease_is_free_only_a_full_duration_after_we_saw_it_change(
    now: float, free: bool
) -> None:
    assert lease_is_free(Observation("other", STAMP, 100.0), "me", now=now, duration=15) is free


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"), [(10, 10, 2), (15, 10, 10), (15, 10, 0), (5, 10, 2)]
)
def test_inconsistent_timings_are_refused(duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError, match="leader election "):
        ElectionSettings(lease_duration=duration, renew_deadline=deadline, retry_period=retry)


def test_lease_stamps_always_carry_a_fraction_of_a_second() -> None:
    """The API server refuses a MicroTime that lightkube prints without one."""
    from unittest import mock

    from ome_routing.kube import leader

    whole = datetime(2026, 11, 29, 17, 0, 5, tzinfo=UTC)
    with mock.patch.object(leader, "datetime", wraps=datetime) as clock:
        clock.now.return_value = whole
        assert leader.micro_now() == whole.replace(microsecond=1)
