"""The Kubernetes-backed reporter's stamps: observedAt is when a live view last gave the count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ome_routing.reporter.stamping import Count, Freshness, refresh, stamp

T0 = datetime(2026, 9, 28, 10, 0, tzinfo=UTC)
LATER = T0 + timedelta(seconds=30)


class TestStamp:
    def test_a_live_view_without_health_checks_is_current_now(self) -> None:
        assert stamp(Freshness(view_live=True), LATER) == LATER

    def test_a_broken_view_stamps_nothing(self) -> None:
        assert stamp(Freshness(view_live=False), LATER) is None
        assert stamp(Freshness(view_live=False, health_on=True, health_round_at=T0), LATER) is None

    def test_with_health_checks_the_stamp_is_the_last_rounds_start(self) -> None:
        fresh = Freshness(view_live=True, health_on=True, health_round_at=T0)
        assert stamp(fresh, LATER) == T0

    def test_with_health_checks_before_any_round_nothing_is_stamped(self) -> None:
        assert stamp(Freshness(view_live=True, health_on=True), LATER) is None


class TestRefresh:
    def test_a_fresh_figure_replaces_the_last_count(self) -> None:
        assert refresh(Count(2, T0), 1, LATER) == Count(1, LATER)

    def test_without_a_stamp_the_last_count_is_kept_with_its_old_stamp(self) -> None:
        assert refresh(Count(2, T0), 1, None) == Count(2, T0)

    def test_a_service_never_counted_stays_uncounted_without_a_stamp(self) -> None:
        assert refresh(None, 1, None) is None

    def test_a_stamp_never_goes_back(self) -> None:
        assert refresh(Count(2, LATER), 1, T0) == Count(2, LATER)
